"""`python -m skillopt_dsl.cli ...`: the `skillopt-dsl` command line."""

from skillopt_dsl.cli import main

main()
