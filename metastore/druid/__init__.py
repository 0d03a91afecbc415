"""The Druid dialect, pure (SPEC §1): Druid's JSON in, validated plans out. No file I/O."""
