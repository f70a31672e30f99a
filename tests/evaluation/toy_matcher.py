"""A toy semantic matcher for the scoring tests: two texts match when they are
the same once lower-cased, their spaces squeezed and a few ICU abbreviations
spelled out."""

SYNONYMS = {
    "aki": "acute kidney injury",
    "ards": "acute respiratory distress syndrome",
    "ne": "norepinephrine",
    "start ne": "start norepinephrine",
}


def canon(text: str) -> str:
    text = " ".join(text.lower().split())
    return SYNONYMS.get(text, text)


def toy_match(a: str, b: str) -> bool:
    return canon(a) == canon(b)
