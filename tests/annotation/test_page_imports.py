"""The physicians' pages hold neither pandas nor the other heavy libraries
(issue 35, memory): a fresh Python process imports the annotation views and
their URLconf (the labelling page's code, with windows.presentation and
windows.selectors) without importing them. The code that computes concept
tracks imports pandas when it computes."""

import sys

from tests.web_process import web_script_result

HEAVY = (
    "pandas",
    "pyarrow",
    "sklearn",
    "scipy",
    "statsmodels",
    "matplotlib",
    "torch",
    "sentence_transformers",
)

SCRIPT = """
import json, sys
import django
django.setup()
import annotation.urls, annotation.views, windows.presentation, windows.selectors
from windows.concepts import CONCEPT_COLUMNS
from windows.selectors import VENTILATION_LEVELS
print(json.dumps({
    "levels": list(VENTILATION_LEVELS),
    "columns": len(CONCEPT_COLUMNS),
    "heavy": sorted(m for m in sys.argv[1].split(",") if m in sys.modules),
}))
"""


def test_the_annotation_views_import_no_pandas():
    result = web_script_result(SCRIPT, ",".join(HEAVY))
    assert result["levels"] == ["none", "supplemental_o2", "hfnc", "niv", "invasive"]
    assert result["columns"] > 0
    assert result["heavy"] == []


def test_computing_the_tracks_still_imports_what_it_needs():
    from windows.concepts import EVENT_COLUMNS, compute_stay_tracks
    from windows.concepts.respiratory import PRIORITY

    assert "time" in EVENT_COLUMNS
    assert callable(compute_stay_tracks)
    assert PRIORITY["invasive"] == 5
    assert "pandas" in sys.modules
