"""manage.py bootstrap: everything `make run` needs before serving: migrate,
import the CLIF demo cohort on the first run (with its windows and concept
tracks), select its default cohort of 94 stays, create the demo accounts."""
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import BaseCommand

from windows.accounts import demo_accounts_ensure
from windows.cohort import cohort_build
from windows.models import Admission, Cohort, Source

DEMO_COHORT = "CLIF demo"


class Command(BaseCommand):
    help = "Migrate, import the CLIF demo on first run, create demo accounts."

    def add_arguments(self, parser):
        parser.add_argument("--skip-demo", action="store_true",
                            help="Do not import the CLIF demo cohort.")

    def handle(self, *args, skip_demo=False, **options):
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        if skip_demo:
            pass
        elif Admission.objects.filter(source=Source.CLIF).exists():
            self.stdout.write("CLIF demo already imported; skipping the import.")
        else:
            self.stdout.write("Importing the CLIF demo cohort (first run only)...")
            call_command("import_clif", stdout=self.stdout, stderr=self.stderr)
            self.stdout.write("Building windows, Gold sample and concept tracks...")
            call_command("build_windows", all=True, stdout=self.stdout, stderr=self.stderr)
            call_command("build_concepts", stdout=self.stdout, stderr=self.stderr)
        if not skip_demo and Admission.objects.filter(source=Source.CLIF).exists():
            self._demo_cohort_ensure()
        created = demo_accounts_ensure()
        if created:
            self.stdout.write(self.style.WARNING(
                "Demo accounts created. Passwords are shown only now; set "
                "REALICU_*_PASSWORD before the first run to choose them:"))
            for username, role, password in created:
                self.stdout.write(f"  {username:<12} {role:<11} {password}")

    def _demo_cohort_ensure(self):
        """The demo's default cohort (spec section 2's settings), for the
        Oracle's and the campaigns' forms: built once, kept as it is after."""
        if Cohort.objects.filter(name=DEMO_COHORT).exists():
            return
        try:
            cohort = cohort_build(name=DEMO_COHORT, target_size=94, seed=0)
        except ValidationError as exc:
            self.stdout.write(self.style.WARNING(
                "The demo cohort was not built: " + "; ".join(exc.messages)))
            return
        self.stdout.write(
            f"Demo cohort {cohort.pk} {cohort.name!r}: {cohort.summary['size']} stays.")
