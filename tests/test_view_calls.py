"""STYLE.md: a view parses, calls one service or selector, and renders
(issue 37: no view calls more than two). scripts/view_calls.py counts, per
view, the service and selector functions it calls, through the module's own
helpers; this runs it over the project."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location(
    "view_calls", ROOT / "scripts" / "view_calls.py"
)
view_calls = importlib.util.module_from_spec(spec)
spec.loader.exec_module(view_calls)


def test_no_view_calls_more_than_two_services_or_selectors():
    assert dict(view_calls.views_over(2)) == {}


@pytest.fixture
def project(tmp_path):
    """An app with a services module, a selectors package and views."""
    app = tmp_path / "shop"
    (app / "selectors").mkdir(parents=True)
    (app / "__init__.py").write_text("")
    (app / "services.py").write_text("def order_place(**kw): pass\n")
    (app / "selectors" / "__init__.py").write_text("def order_get(**kw): pass\n")
    (app / "selectors" / "pages.py").write_text("def order_page(**kw): pass\n")
    return tmp_path


def test_calls_are_counted_through_the_module_s_own_helpers(project):
    (project / "shop" / "views.py").write_text(
        "from shop import selectors, services\n"
        "from shop.selectors import pages\n"
        "from shop.selectors.pages import order_page\n"
        "def _page(request):\n"
        "    return pages.order_page(id=1)\n"
        "def order_new(request):\n"
        "    order = selectors.order_get(id=1)\n"
        "    services.order_place(order=order)\n"
        "    return _page(request)\n"
        "def order_view(request):\n"
        "    order_page(id=1)\n"
        "    return order_page(id=2)\n"
    )

    counts = view_calls.module_counts(project / "shop" / "views.py", project)

    assert counts == {
        "order_new": {
            "shop.selectors.order_get",
            "shop.services.order_place",
            "shop.selectors.pages.order_page",
        },
        "order_view": {"shop.selectors.pages.order_page"},
    }
    assert [view for view, _ in view_calls.views_over(2, project)] == [
        "shop/views.py:order_new"
    ]
