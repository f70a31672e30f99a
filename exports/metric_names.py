"""The figures a Gold or Scale release scores (evaluation.metrics), in the
order the score pages, the leaderboard, the API and the plots list them, and
their titles (``@k`` stands for the submission's k). No import, so that the
selectors name them without loading the scoring (numpy)."""

METRIC_TITLES = {
    "status_accuracy": "Status accuracy",
    "status_macro_f1": "Status macro-F1",
    "problems_hit_at_k": "Problems Hit@k",
    "problems_recall_at_k": "Problems Recall@k",
    "actions_hit_at_k": "Actions Hit@k",
    "actions_recall_at_k": "Actions Recall@k",
    "actions_hrr_at_k": "Actions HRR@k",
}
METRIC_KEYS = tuple(METRIC_TITLES)
