"""The one weighted least-squares system ``A theta = r`` (MATH.md section 4).

:mod:`.wls` builds, solves and samples it (dense Cholesky, matrix-free CG);
:mod:`.woodbury` is the exact dual solve for ``D > N``.
"""
