"""The {% listing %} tag: a table in its wrap with its pager, or the empty note."""

from django.core.paginator import Paginator
from django.template import Context, RequestContext, Template
from django.test import RequestFactory

SOURCE = (
    "{% load listing %}{% listing page noun=noun class=css data_nav_list=True %}"
    "<tbody>{% for n in page %}<tr><td>{{ n }}</td></tr>{% endfor %}</tbody>"
    "{% empty %}No {{ noun }} yet.{% endlisting %}"
)


def render(items, **extra):
    page = Paginator(items, 2).get_page(1)
    context = {"page": page, "noun": "stays", "css": 'data "x"', **extra}
    request = RequestFactory().get("/stays/")
    return Template(SOURCE).render(RequestContext(request, context))


def test_rows_come_in_the_table_with_its_attributes_and_the_pager():
    html = render([1, 2, 3])
    assert '<table class="data &quot;x&quot;" data-nav-list>' in html
    assert "<td>1</td>" in html and "<td>3</td>" not in html
    assert 'aria-label="Pages of stays"' in html
    assert "No stays yet." not in html


def test_no_row_shows_only_the_empty_note():
    html = render([])
    assert '<p class="empty">No stays yet.</p>' in html
    assert "<table" not in html and "Pages of" not in html


def test_a_plain_list_has_no_pager():
    source = (
        "{% load listing %}{% listing items class='data' %}"
        "<tbody>{% for n in items %}<tr><td>{{ n }}</td></tr>{% endfor %}</tbody>"
        "{% empty %}None.{% endlisting %}"
    )
    request = RequestFactory().get("/")
    html = Template(source).render(RequestContext(request, {"items": [1, 2, 3]}))
    assert '<table class="data"><tbody><tr><td>1</td></tr>' in html
    assert "<td>3</td>" in html and "pager" not in html and "None." not in html


def test_the_frame_classes_can_change():
    source = (
        "{% load listing %}{% listing items wrap='table-scroll' note='muted' %}"
        "<tbody></tbody>{% empty %}None.{% endlisting %}"
    )
    filled = Template(source).render(Context({"items": [1]}))
    assert '<div class="table-scroll">' in filled and "<table><tbody>" in filled
    assert '<p class="muted">None.</p>' in Template(source).render(Context({}))
