"""The numbers each chapter's prose quotes, computed in one function per chapter (one module each).

A chapter's markdown quotes measured and reported numbers through myst-nb's glue
(``{glue:text}`ch7_full_best_map:.2f```), never typed by hand. The values are computed here, not
in the notebook's cells: one function per chapter takes what the chapter measured (this run's
tables and the committed ``full`` record) and returns ``{glue name: value}`` in a fixed order,
which the chapter glues in one call (:func:`unifar.book.glue_dict`). A reader who meets a name in
the prose (``ch5_n_better``) finds its definition by searching this package for it.
``tests/test_prose.py`` checks that, given the committed results, each function returns every
value the committed chapter shows that does not depend on the run alone, and that the chapter's
markdown quotes no name the chapter does not glue.

* :func:`ch1`: the model and CSFCube (:mod:`~unifar.prose.chapter1`);
* :func:`ch2`: rhetorical sentence embeddings and the facet labeller (:mod:`~unifar.prose.chapter2`);
* :func:`ch3`: data construction, the mining signal, leakage, the FTUs (:mod:`~unifar.prose.chapter3`);
* :func:`ch4`: training, this run and the full profile (:mod:`~unifar.prose.chapter4`), and the
  committed dev studies (:mod:`~unifar.prose.chapter4_studies`);
* :func:`ch5`: evaluation, power, verdicts, the attention ceiling (:mod:`~unifar.prose.chapter5`);
* :func:`ch6`: table 3's ablations, figure 3, the case study (:mod:`~unifar.prose.chapter6`);
* :func:`ch7`: FLeW (:mod:`~unifar.prose.chapter7`);
* :func:`ch8`: combining objectives (:mod:`~unifar.prose.chapter8`).

Each value is marked in a comment as *reported in the paper* (from :mod:`unifar.paper`) or *measured here*
(this run, or the full profile).
"""

from __future__ import annotations

from .chapter1 import ch1
from .chapter2 import ch2
from .chapter3 import ch3
from .chapter4 import ch4
from .chapter5 import ch5
from .chapter6 import ch6
from .chapter7 import ch7
from .chapter8 import ch8

__all__ = ["ch1", "ch2", "ch3", "ch4", "ch5", "ch6", "ch7", "ch8"]
