"""Cost analysis: the price catalogue, the billable-time model, per-configuration metrics, recommendation.

``prices`` knows what an instance-hour costs; ``billing`` turns a run into billable seconds;
``metrics`` aggregates runs into one row per configuration (instance type x batch size);
``recommend`` picks the fastest, the cheapest and the Pareto set; ``records`` reads DescribeTrainingJob
dumps found beside imported logs.
"""
