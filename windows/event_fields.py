"""The columns that say what a clinical event is (windows.models.Event), named
once for the admin's list, the concept computations' frame and the agents'
contexts. No Django import: the concept computations name them without it."""

EVENT_VALUE_FIELDS = (
    "kind",
    "domain",
    "category",
    "name",
    "value_num",
    "unit",
    "value_text",
)
