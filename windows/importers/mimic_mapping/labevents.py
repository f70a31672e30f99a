"""labevents items in CLIF lab categories, with their reference units and
conversions."""

from __future__ import annotations

from windows.importers.mimic_mapping.items import OBS, ItemMapping, _items
from windows.models import Domain

# CLIF lab categories with their reference units (labs.csv target_uom, as the
# consortium writes them: 10*3/uL for platelets and WBC, 10^3/µL for the
# differential counts) and conversions (consortium labs.csv, rows to map);
# blood gases section 7, other labs section 8.
_LABS = {
    50862: ("albumin", "g/dL"),  # Albumin
    50863: ("alkaline_phosphatase", "U/L"),  # Alkaline Phosphatase
    50861: ("alt", "U/L"),  # Alanine Aminotransferase (ALT)
    50878: ("ast", "U/L"),  # Asparate Aminotransferase (AST)
    51146: ("basophils_percent", "%"),  # Basophils
    52069: ("basophils_absolute", "10^3/µL"),  # Absolute Basophil Count
    50885: ("bilirubin_total", "mg/dL"),  # Bilirubin, Total
    50883: ("bilirubin_conjugated", "mg/dL"),  # Bilirubin, Direct
    50884: ("bilirubin_unconjugated", "mg/dL"),  # Bilirubin, Indirect
    51006: ("bun", "mg/dL"),  # Urea Nitrogen
    52647: ("bun", "mg/dL"),  # Urea Nitrogen
    50893: ("calcium_total", "mg/dL"),  # Calcium, Total
    50808: ("calcium_ionized", "mg/dL", 4.0),  # Free Calcium (mmol/L)
    51624: ("calcium_ionized", "mg/dL", 4.0),  # Free Calcium (mmol/L)
    50882: ("bicarbonate", "mmol/L"),  # Bicarbonate (mEq/L)
    51739: ("bicarbonate", "mmol/L"),  # Total CO2 (mEq/L)
    50902: ("chloride", "mmol/L"),  # Chloride
    50806: ("chloride", "mmol/L"),  # Chloride, Whole Blood
    52535: ("chloride", "mmol/L"),  # Chloride
    50912: ("creatinine", "mg/dL"),  # Creatinine
    52024: ("creatinine", "mg/dL"),  # Creatinine, Whole Blood
    52546: ("creatinine", "mg/dL"),  # Creatinine
    50889: ("crp", "mg/L"),  # C-Reactive Protein
    51652: ("crp", "mg/L"),  # High-Sensitivity CRP
    51200: ("eosinophils_percent", "%"),  # Eosinophils
    52073: ("eosinophils_absolute", "10^3/µL"),  # Absolute Eosinophil Count
    51199: ("eosinophils_absolute", "10^3/µL", 0.001),  # Eosinophil Count (#/uL)
    51288: ("esr", "mm/Hr"),  # Sedimentation Rate
    50924: ("ferritin", "ng/mL"),  # Ferritin
    50931: ("glucose_serum", "mg/dL"),  # Glucose
    50809: ("glucose_serum", "mg/dL"),  # Glucose (blood gas)
    52569: ("glucose_serum", "mg/dL"),  # Glucose
    51222: ("hemoglobin", "g/dL"),  # Hemoglobin
    50811: ("hemoglobin", "g/dL"),  # Hemoglobin (blood gas)
    51645: ("hemoglobin", "g/dL"),  # Hemoglobin, Calculated
    50970: ("phosphate", "mg/dL"),  # Phosphate
    51237: ("inr", None),  # INR(PT)
    51675: ("inr", None),  # INR(PT)
    50813: ("lactate", "mmol/L"),  # Lactate
    53154: ("lactate", "mmol/L"),  # Lactate
    50954: ("ldh", "U/L"),  # Lactate Dehydrogenase (LD)
    51244: ("lymphocytes_percent", "%"),  # Lymphocytes
    51245: ("lymphocytes_percent", "%"),  # Lymphocytes, Percent
    51133: ("lymphocytes_absolute", "10^3/µL"),  # Absolute Lymphocyte Count
    52769: ("lymphocytes_absolute", "10^3/µL", 0.001),  # Absolute Lymphocyte (#/uL)
    50960: ("magnesium", "mg/dL"),  # Magnesium
    51254: ("monocytes_percent", "%"),  # Monocytes
    52074: ("monocytes_absolute", "10^3/µL"),  # Absolute Monocyte Count
    51253: ("monocytes_absolute", "10^3/µL", 0.001),  # Monocyte Count (#/uL)
    51256: ("neutrophils_percent", "%"),  # Neutrophils
    53164: ("neutrophils_percent", "%"),  # Neutrophils
    52075: ("neutrophils_absolute", "10^3/µL"),  # Absolute Neutrophil Count
    53159: ("neutrophils_absolute", "10^3/µL"),  # Absolute Neutrophil Count
    50818: ("pco2_arterial", "mmHg"),  # pCO2
    50821: ("po2_arterial", "mmHg"),  # pO2
    50820: ("ph_arterial", None),  # pH
    51265: ("platelet_count", "10*3/uL"),  # Platelet Count
    50971: ("potassium", "mmol/L"),  # Potassium
    50822: ("potassium", "mmol/L"),  # Potassium, Whole Blood
    52610: ("potassium", "mmol/L"),  # Potassium
    51274: ("pt", "sec"),  # PT
    51275: ("ptt", "sec"),  # PTT
    50817: ("so2_arterial", "%"),  # Oxygen Saturation (consortium: unsure)
    50983: ("sodium", "mmol/L"),  # Sodium
    50824: ("sodium", "mmol/L"),  # Sodium, Whole Blood
    52623: ("sodium", "mmol/L"),  # Sodium
    50976: ("total_protein", "g/dL"),  # Protein, Total
    51003: ("troponin_t", "ng/L", 1000.0),  # Troponin T (ng/mL)
    52642: ("troponin_i", "ng/L", 1000.0),  # Troponin I (ng/mL)
    51300: ("wbc", "10*3/uL"),  # WBC Count
    51301: ("wbc", "10*3/uL"),  # White Blood Cells
    51755: ("wbc", "10*3/uL"),  # White Blood Cells
    51756: ("wbc", "10*3/uL"),  # White Blood Cells
    # Project categories for the blood-gas panel of section 7.
    52033: "specimen_type",  # Specimen Type (text; ART. = arterial)
    50801: "aado2",  # Alveolar-arterial Gradient
    50802: "base_excess",  # Base Excess
    50803: "bicarbonate_calculated",  # Calculated Bicarbonate, Whole Blood
    50804: "total_co2_calculated",  # Calculated Total CO2
    50805: "carboxyhemoglobin",  # Carboxyhemoglobin
    50814: "methemoglobin",  # Methemoglobin
    50810: "hematocrit",  # Hematocrit, Calculated
    50815: "o2_flow_lab",  # O2 Flow
    50816: "fio2_lab",  # Oxygen (FiO2, percent)
    50819: "peep_lab",  # PEEP
    50823: "required_o2",  # Required O2
    50825: "temperature_lab",  # Temperature
    50807: "blood_gas_comments",  # Comments
    # Project categories for the labs of section 8 CLIF has no category for.
    51196: "d_dimer",  # D-Dimer
    51214: "fibrinogen",  # Fibrinogen, Functional
    51297: "thrombin_time",  # Thrombin
    51221: "hematocrit",  # Hematocrit
    51248: "mch",  # MCH
    51249: "mchc",  # MCHC
    51250: "mcv",  # MCV
    51279: "rbc",  # Red Blood Cells
    51277: "rdw",  # RDW
    52159: "rdw_sd",  # RDW-SD
    50868: "anion_gap",  # Anion Gap
    50930: "globulin",  # Globulin
    # Excluded on purpose (section 7: whole-blood electrolytes; section 8:
    # point-of-care chemistry): labs, no category.
    52390: "",
    52408: "",
    52411: "",
    52456: "",
    52502: "",
    52525: "",
    52566: "",
    52579: "",
    52603: "",
}

LABEVENTS: dict[int, ItemMapping] = _items(Domain.LABS, OBS, _LABS)
