from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"

    def ready(self):
        from annotation.models import RecomputeState
        from jobs.registry import JobKind, register

        register(
            JobKind(
                name="agreement-recompute",
                model="annotation.AgreementRecompute",
                task="annotation.tasks.agreement_recompute_task",
                states=RecomputeState,
            )
        )
        register(
            JobKind(
                name="calibration-draw",
                model="annotation.CalibrationDraw",
                task="annotation.tasks.calibration_draw_task",
                states=RecomputeState,
            )
        )
