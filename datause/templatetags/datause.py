"""Data-use panels for other apps' pages: the terms of what a page shows
(a campaign, a cohort, a release), and the egress decision a run started
under, with its attestations (issue 34)."""

from __future__ import annotations

from django import template

from datause.selectors import data_use_of, egress_decision_for_run

register = template.Library()


@register.inclusion_tag("datause/partials/_terms.html")
def data_use_terms(subject):
    """The terms of ``subject``: its sources, their agreements and the
    citations they ask for."""
    data_use = data_use_of(subject) if subject is not None else None
    citations = []
    if data_use is not None:
        citations = list(
            dict.fromkeys(c for s in data_use.sources for c in (s.citations or []))
        )
    return {"data_use": data_use, "citations": citations}


@register.inclusion_tag("datause/partials/_egress.html")
def egress_provenance(run):
    """Where the run sends its contexts and the attestations it started
    under (datause.EgressDecision)."""
    return {"decision": egress_decision_for_run(run) if run is not None else None}
