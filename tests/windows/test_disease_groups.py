"""ICD codes to disease groups (paper Figure 8: ICD chapters, sepsis apart)."""

import pytest

from windows.disease_groups import disease_group, first_ranked
from windows.models import DiseaseGroup as G


@pytest.mark.parametrize(
    "code,version,group",
    [
        ("A419", 10, G.SEPSIS),
        ("R6521", 10, G.SEPSIS),
        ("0389", 9, G.SEPSIS),
        ("99592", 9, G.SEPSIS),
        ("78552", 9, G.SEPSIS),
        ("A099", 10, G.INFECTIOUS),
        ("I214", 10, G.CARDIOVASCULAR),
        ("41071", 9, G.CARDIOVASCULAR),
        ("J9601", 10, G.RESPIRATORY),
        ("486", 9, G.RESPIRATORY),
        ("K7030", 10, G.GI_HEPATIC),
        ("5723", 9, G.GI_HEPATIC),
        ("S065X0A", 10, G.INJURY_POISONING),
        ("T40601A", 10, G.INJURY_POISONING),
        ("96500", 9, G.INJURY_POISONING),
        ("E8809", 9, G.INJURY_POISONING),
        ("C3490", 10, G.ONCOLOGY),
        ("D62", 10, G.HEMATOLOGIC),
        ("N179", 10, G.RENAL_GU),
        ("584.9", 9, G.RENAL_GU),
        ("I61.9", 10, G.CARDIOVASCULAR),
        ("G9340", 10, G.NEUROLOGICAL),
        ("E1110", 10, G.ENDOCRINE),
        ("R570", 10, G.SIGNS_SYMPTOMS),
        ("V5861", 9, G.OTHER),
        ("Z9911", 10, G.OTHER),
        ("", 10, G.UNKNOWN),
        ("I214", None, G.UNKNOWN),
    ],
)
def test_code_maps_to_its_group(code, version, group):
    assert disease_group(code, version) == group


def test_primary_diagnosis_stands_for_the_admission():
    dx = [
        {"code": "5723", "rank": 3},
        {"code": "0389", "rank": 1},
        {"code": "", "rank": 0},
    ]
    assert first_ranked(dx)["code"] == "0389"
    assert first_ranked([]) is None
