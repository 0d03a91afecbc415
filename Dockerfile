# Strata: one image for the web server, the Celery worker and beat, and the Spark
# standalone master and workers (docker-compose.yml). Spark comes from the pyspark
# wheel, so the driver (in the Celery worker) and the executors run exactly the
# same Spark and the same Python, as Spark requires.
#
# bookworm: its Debian release still ships openjdk-17 (trixie does not).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Java 17 for Spark; procps because Spark's scripts call ps.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java

WORKDIR /app

# Dependencies first, so that a code change does not reinstall them.
COPY pyproject.toml ./
RUN mkdir console metastore workers \
    && touch console/__init__.py metastore/__init__.py workers/__init__.py \
    && pip install . \
    && pip uninstall -y strata \
    && rm -rf console metastore workers

COPY manage.py ./
COPY console ./console
COPY metastore ./metastore
COPY workers ./workers
COPY templates ./templates
RUN pip install --no-deps . \
    && ln -s "$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" /opt/spark

# The code runs from /app (templates and migrations live beside it).
ENV PYTHONPATH=/app \
    DJANGO_SETTINGS_MODULE=console.settings \
    JAVA_HOME=/opt/java \
    SPARK_HOME=/opt/spark \
    PYSPARK_PYTHON=python3 \
    STRATA_DATA_DIR=/data \
    STRATA_INPUT_ROOTS=/data/input

RUN useradd --create-home --uid 1000 strata \
    && mkdir -p /data/input \
    && chown -R strata:strata /data
USER strata

EXPOSE 8000
CMD ["gunicorn", "console.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "2", "--timeout", "120", "--access-logfile", "-"]
