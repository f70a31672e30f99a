"""``{% listing %}``: a table in its ``table-wrap`` div or, with no row at all,
the page's ``p.empty`` note; a page of rows (a ``Page``) adds the pager.

The listing pages repeated that frame around each of their tables:

    {% listing page noun="stays" class="data" data_nav_list=True %}
      <thead>…</thead><tbody>…</tbody>
    {% empty %}No stays yet.{% endlisting %}

``noun`` and ``shortcuts`` go to ``partials/_pager.html``; ``wrap`` and
``note`` change the classes of the div and of the empty note; every other
keyword is an attribute of the ``<table>`` (``_`` read as ``-``, ``True`` as a
bare attribute)."""

from django import template
from django.forms.utils import flatatt
from django.template.base import token_kwargs
from django.template.loader import get_template

register = template.Library()
# Keywords for the frame rather than the <table>, with their defaults.
FRAME = {"noun": None, "shortcuts": None, "wrap": "table-wrap", "note": "empty"}


class ListingNode(template.Node):
    def __init__(self, items, kwargs, rows, empty):
        self.items, self.kwargs, self.rows, self.empty = items, kwargs, rows, empty

    def render(self, context):
        values = {key: value.resolve(context) for key, value in self.kwargs.items()}
        attrs = {k.replace("_", "-"): v for k, v in values.items() if k not in FRAME}
        items = self.items.resolve(context)
        paged = hasattr(items, "paginator")
        filled = bool(items.paginator.count if paged else items)
        with context.push(
            {"page": items} if paged else {},
            paged=paged,
            filled=filled,
            table_attrs=flatatt(attrs),
            rows=self.rows.render(context) if filled else "",
            empty="" if filled else self.empty.render(context),
            **{
                k: values.get(k, default)
                for k, default in FRAME.items()
                if k in values or default is not None
            },
        ):
            return get_template("partials/_listing.html").template.render(context)


def listing(parser, token):
    bits = token.split_contents()
    if len(bits) < 2:
        raise template.TemplateSyntaxError("{% listing %} takes its rows first")
    items = parser.compile_filter(bits[1])
    remaining = bits[2:]
    kwargs = token_kwargs(remaining, parser)
    if remaining:
        raise template.TemplateSyntaxError(f"listing: not a keyword: {remaining[0]}")
    rows = parser.parse(("empty",))
    parser.delete_first_token()
    empty = parser.parse(("endlisting",))
    parser.delete_first_token()
    return ListingNode(items, kwargs, rows, empty)


register.tag("listing", listing)
