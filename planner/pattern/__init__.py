"""Index-assisted planning of sequential pattern queries (dissertation 3.4).

Modules: :mod:`.conditions` (single-attribute range conditions of a symbol), :mod:`.rewrite`
(basic symbols and Kleene-star gaps, Table 3.2), :mod:`.intervals` (Algorithm 3.1, vectorized),
:mod:`.hypo` (the hypoexponential candidate-length distribution), :mod:`.cost` (the cost model),
:mod:`.cpm` (the coarse pattern map over a TAB+-tree level), :mod:`.selection` (All, Greedy,
Budget, Optimal = Algorithm 3.2), :mod:`.navigation` (PREV/NEXT reach), :mod:`.planner` (the
planner registered in the query hub), :mod:`.explain` (EXPLAIN details), :mod:`.calibrate`
(fitting the cost model's weights on this machine).
"""
