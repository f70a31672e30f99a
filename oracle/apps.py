from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _defaults_ensure(sender, using="default", **kwargs) -> None:
    """After every migrate (so `make run`'s bootstrap leaves them): the rules
    backbone and the default hindsight prompt, with which the Oracle runs with
    no LLM configured. Both are made only if absent."""
    from oracle.prompts import prompt_default_get_or_create
    from oracle.selectors import backbone_rules_default

    if using != "default":
        return
    backbone_rules_default()
    prompt_default_get_or_create()


class OracleConfig(AppConfig):
    name = "oracle"

    def ready(self) -> None:
        post_migrate.connect(
            _defaults_ensure, sender=self, dispatch_uid="oracle_defaults_ensure"
        )
