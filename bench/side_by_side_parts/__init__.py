"""Parts of bench/side_by_side.py: the scenarios (the rows of issue 16), what /proc says
about the processes under test, the summary table and the chart."""
