"""The console's retention rules page: a dataSource's rules as JSON, previewed
("this would drop N segments, M rows, in these intervals") before they are saved.

Saving needs the preview of exactly the text being saved: the preview form
carries a digest of the text it previewed, and a save whose text differs is
previewed again instead of stored.
"""

from __future__ import annotations

import hashlib
import json

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render

from console.security import role_required
from metastore import selectors, services
from metastore.duties.retention import RuleError, parse_rules, rules_json
from metastore.selectors import retention as retention_selectors
from metastore.strict_json import JSONRefused, parse_json_text


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _context(name: str, text: str, **extra) -> dict:
    return {
        "name": name,
        "rules_text": text,
        "default_rules": json.dumps(rules_json(retention_selectors.default_rules()), indent=2),
        "history": retention_selectors.rules_history(key=name, count=10)[::-1],
        **extra,
    }


def _parsed(text: str):
    """(rules, None) or (None, (field, message))."""
    try:
        return parse_rules(parse_json_text(text, field="rules")), None
    except JSONRefused as exc:
        return None, (exc.field or "rules", f"the rules are {exc.detail}")
    except RuleError as exc:
        return None, (exc.field, exc.message)


@role_required()
def rules_page(request, name: str):
    if not selectors.datasource_known(name=name):
        raise Http404(f"no dataSource {name}")
    if request.method != "POST":
        stored = retention_selectors.rules_stored(datasource=name) or []
        return render(request, "console/rules.html", _context(name, json.dumps(stored, indent=2)))
    text = request.POST.get("rules", "")
    rules, error = _parsed(text)
    if error:
        context = _context(name, text, error_field=error[0], error_message=error[1])
        return render(request, "console/rules.html", context, status=400)
    previewed = request.POST.get("previewed", "")
    if request.POST.get("action") == "save" and previewed == _digest(text):
        try:
            services.rules_set(
                datasource=name,
                rules=rules_json(rules),
                comment=request.POST.get("comment", ""),
                ip=request.META.get("REMOTE_ADDR", ""),
                user=request.user,
            )
        except RuleError as exc:
            context = _context(name, text, error_field=exc.field, error_message=exc.message)
            return render(request, "console/rules.html", context, status=400)
        messages.success(request, f"Saved {len(rules)} rules for {name}")
        return redirect("console:rules", name=name)
    preview = retention_selectors.drop_preview(datasource=name, rules=rules)
    context = _context(name, text, preview=preview, previewed=_digest(text))
    return render(request, "console/rules.html", context)
