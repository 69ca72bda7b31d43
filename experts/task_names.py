"""Registered names of the experts app's Celery tasks: the one place a task name is spelled out."""

ROUTE_EXPERT_REVIEWS = "experts.tasks.route_expert_reviews"
EVALUATE_EXPERT_GATE = "experts.tasks.evaluate_expert_gate"
RECONCILE_EXPERT_GATES = "experts.tasks.reconcile_expert_gates"
JUDGE_COMPARISON_SET = "experts.tasks.judge_comparison_set"
RECONCILE_JUDGE_COMPARISONS = "experts.tasks.reconcile_judge_comparisons"
