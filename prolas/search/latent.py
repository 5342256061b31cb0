"""PROLAS: Bayesian optimisation in the KG-VAE latent space (Lu et al., Algorithm 2).

The objective is ``f(z) = BIC(decode(z))`` on the latent box ``Z = [lo, hi]^d`` of a
trained KG-VAE (:meth:`prolas.vae.TrainedVAE.latent_bounds`), where ``decode(z)`` is
the most likely expression under the decoder (always valid). Every z is decoded and
its expression scored by the shared :class:`~prolas.search.evaluator.Evaluator`.

Two surrogates (``LatentBOConfig.surrogate``):

* ``ot`` (default): a GP with the optimal-transport kernel of :mod:`prolas.surrogates.ot`
  on the *decoded expression* models its log-likelihood ``BIC + k/2 ln N``; a
  candidate's predicted BIC subtracts its exact, known penalty ``k/2 ln N``
  (``penalty="exact"``). The VAE is the proposal generator: each step decodes a latent
  pool (Sobol points of the box, Gaussian perturbations of the best latent points, and
  the latent codes of grammar edits of their sequences, i.e. CKS's moves) and evaluates
  the new expression of highest LogEI. Measured (benchmarks/results/prolas_design/README.md): at
  n = 50 the latent GP predicts held-out BIC with rank correlation 0.26 on airline, the
  OT GP with 0.73; on airline (20 seeds, budget 50) the mean best BIC went from
  113.5-114.4 (latent; d = 4 and d = 8) to 116.9 (ot, GP on BIC) and 117.9 (ot, exact
  penalty). On mauna (200-point thinning) it is behind random search.
* ``latent``: Algorithm 2 as published, steps 2-4 below.

Loop:

1. **Initial design** (``n_init`` points): a scrambled Sobol design in the box (default)
   or encoded grammar samples (posterior means of q(z | r), clipped to the box).
2. **Surrogate**: BoTorch ``SingleTaskGP`` on ``u = (z - lo) / (hi - lo)`` in
   ``[0, 1]^d`` (``n x d`` float64) with standardised outcomes (``Standardize``),
   fitted by exact marginal likelihood (``fit_gpytorch_mll``, warm-started from the
   previous step's hyperparameters).
3. **Acquisition**: ``LogExpectedImprovement`` for one proposal per step (q = 1),
   ``qLogExpectedImprovement`` (quasi-Monte-Carlo) for q > 1, maximised with
   ``optimize_acqf`` over the unit cube (multi-start L-BFGS-B from ``raw_samples``
   random points, ``num_restarts`` starts).
4. **Evaluate**: decode the proposal(s). An expression already evaluated returns its
   cached BIC at no budget cost, and its (z, BIC) pair still joins the data, so the
   surrogate learns that the region holds nothing new. With ``duplicates="pool"``
   (default) the step then also evaluates the *new* expression of highest LogEI among
   the other restart candidates, a Sobol pool and Gaussian perturbations of the best
   points (decoding thousands of z costs ~0.1 s), so a step is never wasted on the
   large latent regions that decode to frequent short expressions. After
   ``stall_limit`` consecutive steps without a new expression the search diversifies:
   it perturbs the incumbent with growing Gaussian steps and, failing that, draws a
   grammar sample.
5. Failed fits get a pessimistic target: the worst successful BIC minus
   ``max(1, margin * (best - worst))``.

The budget counts unique expensive evaluations (the Evaluator's). Deterministic for a
seed: the whole search runs under ``torch.random.fork_rng`` seeded with the seed
(``optimize_acqf`` draws its raw samples from the torch RNG) plus a numpy generator.

Numerics are explicit: the surrogate is fitted and the acquisition evaluated in
float64 with GPyTorch's fast computations off (dense Cholesky at every size), whatever
``import botorch`` set globally. :mod:`prolas.gp` computes its own likelihood with a
torch Cholesky and is unaffected by these settings.

>>> from prolas.pipeline import SearchConfig
>>> from prolas.search.evaluator import Evaluator, TableScorer
>>> ev = Evaluator(TableScorer({"LIN*PER": 5.0}, default=0.0), budget=12)
>>> res = search_prolas(ev, None, SearchConfig(budget=12))   # doctest: +SKIP
>>> res.evaluations                                          # doctest: +SKIP
12
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from prolas.errors import ProlasError
from prolas.expr import Expression, parse
from prolas.search.evaluator import BudgetExhausted, Evaluator, SearchResult

if TYPE_CHECKING:  # pragma: no cover
    from prolas.data import Dataset
    from prolas.pipeline import SearchConfig
    from prolas.vae import TrainedVAE

__all__ = [
    "LatentBOConfig",
    "search_prolas",
    "resolve_vae",
    "quick_vae_config",
    "sequence_edits",
]

DTYPE = torch.float64
INIT_DESIGNS = ("grammar", "sobol")
DUPLICATES = ("free", "restarts", "pool")
SURROGATES = ("latent", "ot")
PENALTIES = ("model", "exact")


@dataclass(frozen=True)
class LatentBOConfig:
    """Settings of the latent-space BO loop (defaults measured in
    benchmarks/results/prolas_design/).

    Options about the acquisition optimiser, duplicates, warping and the trust region
    apply to ``surrogate="latent"``; the pool options to both.

    Attributes:
        n_init: size of the initial design (capped at the budget).
        init: ``grammar`` (encoded grammar samples) or ``sobol`` (Sobol points in the box).
        num_restarts, raw_samples: ``optimize_acqf`` multi-start settings.
        mc_samples: quasi-MC samples of qLogEI (q > 1).
        duplicates: what to do when the acquisition's best point decodes to a known
            expression (that point always joins the data for free): ``free`` nothing
            more; ``restarts`` also evaluate the best other restart candidate that
            decodes to a new expression; ``pool`` also evaluate the new expression of
            highest LogEI among the restart candidates, ``pool_sobol`` Sobol points and
            ``pool_local`` perturbations of the ``pool_top`` best points and, with
            ``pool_edits``, the latent codes of grammar edits of their sequences
            (:func:`sequence_edits`); ``pool_grammar`` adds the latent codes of that
            many fresh grammar draws (so the pool covers what random search samples).
        pool_always: (q = 1, ``pool``) take the new expression of highest LogEI over the
            optimiser's candidates and the pool at every step, not only when the
            optimiser's best point decodes to a known expression.
        stall_limit: consecutive steps without a new expression before diversifying.
        perturb_scales: standard deviations (unit-cube units) of the incumbent
            perturbations tried when diversifying, each ``perturb_tries`` times; then up
            to ``grammar_tries`` grammar draws for an expression not evaluated yet.
        margin: pessimistic target of failed fits, ``worst - max(1, margin * range)``.
        max_steps_factor: hard cap of ``max_steps_factor * budget`` BO steps.
        warp: surrogate targets, ``none`` (BIC) or ``clip`` (BIC raised to its median).
        trust_region: seek proposals in a cube of side ``tr_init`` (unit-cube units)
            around the incumbent, doubled after ``tr_success`` improvements in a row,
            halved after ``tr_failure`` new evaluations without one, reset below
            ``tr_min`` (TuRBO, Eriksson et al. 2019).
        box_quantile, box_expand: passed to :meth:`TrainedVAE.latent_bounds`.
        surrogate: what models BIC. ``latent``: BoTorch ``SingleTaskGP`` on the latent
            point z (Algorithm 2 as published). ``ot``: a GP on the *decoded
            expression* with the optimal-transport kernel
            (:class:`prolas.surrogates.ot.OTKernel`); each step decodes a latent pool
            (Sobol points of the box, Gaussian perturbations and encoded grammar edits
            of the ``pool_top`` best latent points) and evaluates the new expression of
            highest LogEI under that GP.
        prior_weight: (``ot``) beta of a prior-weighted acquisition (piBO, Hvarfner et
            al. 2022): a candidate's LogEI plus ``beta / n * log p(sequence)``, the
            grammar's log-probability of its decoded sequence, after n evaluations, so
            that improbable (long, repetitive) expressions need more predicted gain
            early on and the prior's pull fades as data accumulate. 0 disables it.
        penalty: (``ot``) how the surrogate treats BIC's complexity term ``k/2 ln N``.
            ``model``: the GP models BIC itself. ``exact``: the GP models the
            log-likelihood ``BIC + k/2 ln N`` and each candidate's exact penalty, known
            from its expression, is subtracted from the predicted mean, so the GP does
            not have to learn what is known (two expressions the OT kernel finds similar
            differ by their exact penalties). Measured (benchmarks/results/prolas_design/README.md):
            ``exact`` ended higher on 5 of 9 series (airline, call-centre, temperature,
            wages, gas-production), level on 2, lower on solar and internet.
        warm_start: the first ``min(warm_start, n_init)`` points of the initial design are a
            meta-learned portfolio: expressions that ranked well on the other series of
            a benchmark library (:mod:`prolas.search.portfolio`; a dataset named like a
            library series is left out of the ranking), placed at the latent codes of
            their token sequences. The rest of the initial design is as ``init`` says.
        portfolio: path of the library (None: the shipped ``portfolio_bic.json``).
        size_trend: (``ot``) give the surrogate a mean linear in an expression's number of
            hyperparameters k: least squares ``t ~ a + b k`` on the modelled targets
            (b clamped at 0: a larger model fits at least as well), the GP models the
            residuals. Without it, an expression far (in OT distance) from everything
            evaluated is predicted at the data mean with a large variance whatever its
            size, so after a warm start of large expressions LogEI favours small ones.
            Off by default: higher on two of three tuning series but clearly lower on
            airline and mauna (benchmarks/results/size_trend/README.md).
    """

    n_init: int = 10
    init: str = "sobol"
    num_restarts: int = 8
    raw_samples: int = 256
    mc_samples: int = 128
    duplicates: str = "pool"
    pool_sobol: int = 1024
    pool_local: int = 1024
    pool_top: int = 3
    pool_edits: bool = True
    pool_grammar: int = 0
    prior_weight: float = 0.0
    penalty: str = "exact"
    pool_always: bool = False
    stall_limit: int = 20
    perturb_scales: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4)
    perturb_tries: int = 25
    grammar_tries: int = 2000
    margin: float = 0.1
    max_steps_factor: int = 20
    warp: str = "none"
    trust_region: bool = False
    tr_init: float = 0.8
    tr_min: float = 0.05
    tr_success: int = 3
    tr_failure: int = 5
    box_quantile: float = 0.001
    box_expand: float = 0.1
    surrogate: str = "ot"
    warm_start: int = 10
    portfolio: str | None = None
    size_trend: bool = False

    @classmethod
    def from_overrides(cls, items: list[str]) -> LatentBOConfig:
        """Defaults with ``key=value`` overrides (values parsed as JSON, else kept as text),
        e.g. ``["n_init=5", "init=grammar"]`` (used by the tuning scripts)."""
        changes: dict = {}
        for item in items:
            key, value = item.split("=", 1)
            try:
                changes[key] = json.loads(value)
            except json.JSONDecodeError:
                changes[key] = value
        return cls(**changes)

    def __post_init__(self) -> None:
        if self.init not in INIT_DESIGNS:
            raise ProlasError(f"unknown initial design {self.init!r}; choose from {INIT_DESIGNS}")
        if self.duplicates not in DUPLICATES:
            raise ProlasError(f"unknown duplicates policy {self.duplicates!r}; choose {DUPLICATES}")
        if self.surrogate not in SURROGATES:
            raise ProlasError(f"unknown surrogate {self.surrogate!r}; choose from {SURROGATES}")
        if self.penalty not in PENALTIES:
            raise ProlasError(f"unknown penalty {self.penalty!r}; choose from {PENALTIES}")
        if self.warp not in ("none", "clip"):
            raise ProlasError(f"unknown warp {self.warp!r}; choose none or clip")
        if self.n_init < 1 or self.num_restarts < 1 or self.raw_samples < 1:
            raise ProlasError("n_init, num_restarts and raw_samples must be at least 1")
        if self.warm_start < 0:
            raise ProlasError("warm_start must be at least 0")


def quick_vae_config(latent_dim: int = 8):
    """Quick data-specific KG-VAE settings for ``--train-vae`` (goal: <= 2 min, 2 cores)."""
    from prolas.vae import VAEConfig

    return VAEConfig(
        latent_dim=latent_dim, hidden=(256, 256), epochs=30, patience=5, kl_warmup_epochs=8
    )


#: grammar draws for a quick data-specific KG-VAE
QUICK_VAE_SAMPLES = 20_000

_LOADED: dict[tuple, TrainedVAE] = {}


def resolve_vae(
    dataset: Dataset | None,
    config: SearchConfig,
    log: Callable[[str], None] | None = None,
) -> TrainedVAE:
    """The KG-VAE a search uses: ``config.checkpoint`` (shipped name or path), or with
    ``config.train_vae`` a quick KG-VAE trained on ``dataset``'s inputs (r_d on x).

    Loaded checkpoints are kept in memory (keyed by resolved file and modification time),
    so multi-seed comparisons load each once.
    """
    from pathlib import Path

    from prolas.grammar import Grammar
    from prolas.vae import load_checkpoint, train_kgvae

    log = log or (lambda s: None)
    grammar = Grammar.from_file(config.grammar)
    if config.train_vae:
        if dataset is None:
            raise ProlasError("--train-vae needs a data set (r_d is computed on its inputs)")
        t0 = time.perf_counter()
        latent_dim = _default_latent_dim()
        vcfg = replace(quick_vae_config(latent_dim), seed=config.seed)
        log(
            f"training a data-specific KG-VAE on {dataset.n} inputs "
            f"(latent dim {vcfg.latent_dim}, {QUICK_VAE_SAMPLES} grammar draws, "
            f"<= {vcfg.epochs} epochs)"
        )
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # measured: 2 threads on a busy 2-core machine is 10x slower
        try:
            trained = train_kgvae(
                grammar, vcfg, x=dataset.x, n_samples=QUICK_VAE_SAMPLES, progress=False
            )
        finally:
            torch.set_num_threads(threads)
        q = trained.metadata.get("quality", {})
        log(
            f"trained KG-VAE in {time.perf_counter() - t0:.0f} s "
            f"(held-out reconstruction {q.get('heldout_reconstruction', float('nan')):.0%})"
        )
        return trained
    stem = str(config.checkpoint)
    p = Path(stem)
    key_path = p if p.suffix in (".pt", ".json") else p.with_name(p.name + ".json")
    mtime = key_path.stat().st_mtime if key_path.is_file() else None
    # a checkpoint carries its own grammar; an explicitly chosen other grammar must match
    check = grammar if config.grammar != "default" else None
    key = (stem, mtime, check.content_hash if check is not None else None)
    if key not in _LOADED:
        _LOADED[key] = load_checkpoint(stem, grammar=check)
    trained = _LOADED[key]
    q = trained.metadata.get("quality", {})
    acc = q.get("heldout_reconstruction")
    log(
        f"loaded checkpoint {config.checkpoint} (latent dim {trained.latent_dim}"
        + (f", held-out reconstruction {acc:.0%}" if acc is not None else "")
        + ")"
    )
    return trained


def _default_latent_dim() -> int:
    from prolas.vae import list_checkpoints

    for c in list_checkpoints():
        if c.get("name") == "default" and "latent_dim" in c:
            return int(c["latent_dim"])
    return 8


@contextlib.contextmanager
def _numerics():
    """Float64 dense-Cholesky numerics for the BO surrogate, independent of globals."""
    import gpytorch
    import linear_operator

    with contextlib.ExitStack() as stack:
        stack.enter_context(
            gpytorch.settings.fast_computations(
                covar_root_decomposition=False, log_prob=False, solves=False
            )
        )
        stack.enter_context(linear_operator.settings.max_cholesky_size(2**31 - 1))
        stack.enter_context(warnings.catch_warnings())
        # BoTorch warns about standardisation/ill-conditioning that we handle ourselves
        warnings.simplefilter("ignore")
        yield


def size_trend(sizes: list[int], targets: list[float]) -> tuple[float, float]:
    """Least-squares line ``t ~ a + b k`` through (size k, target t) pairs, as ``(a, b)``.

    The slope is clamped at 0 (the maximised log-likelihood of nested models does not
    fall as a model grows; a negative fitted slope is noise) and is 0 when all sizes are
    equal; the intercept is then refitted as the mean of ``t - b k``.
    """
    k = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(targets, dtype=np.float64)
    kc = k - k.mean()
    ss = float(kc @ kc)
    b = max(0.0, float(kc @ (t - t.mean())) / ss) if ss > 0.0 else 0.0
    return float((t - b * k).mean()), b


def sequence_edits(seq: tuple[str, ...], grammar) -> list[tuple[str, ...]]:
    """Grammar-local neighbours of a token sequence (valid sequences of ``grammar``):

    * append ``op B`` (S -> S + B, S -> S * B: CKS's expansions; S -> CP(S, B) and
      CW(S, B) in a grammar with change operations),
    * replace one kernel token by another base kernel (CKS's B -> B'),
    * swap one operation (+ <-> *, or any other operation of the grammar),
    * drop the last ``op K`` pair.

    >>> from prolas.grammar import Grammar
    >>> len(sequence_edits(("LIN", "stop"), Grammar.default()))
    11
    """
    from prolas.errors import GrammarError
    from prolas.grammar import STOP

    core = list(seq[:-1] if seq and seq[-1] == STOP else seq)
    kernels = [k for k, p in zip(grammar.base_kernels, grammar.p_base) if p > 0]
    ops = [o for o, p in zip(grammar.operations, grammar.p_op) if o != STOP and p > 0]
    n_ops = len(core) // 2
    cands: list[list[str]] = []
    if n_ops < grammar.max_operations:
        cands += [core + [o, b] for o in ops for b in kernels]
    for i in range(0, len(core), 2):
        cands += [core[:i] + [b] + core[i + 1 :] for b in kernels if b != core[i]]
    for i in range(1, len(core), 2):
        cands += [core[:i] + [o] + core[i + 1 :] for o in ops if o != core[i]]
    if n_ops >= 1:
        cands.append(core[:-2])
    out = []
    for c in cands:
        q = tuple(c) if len(c) // 2 == grammar.max_operations else (*c, STOP)
        try:
            grammar.validate_sequence(q)
        except GrammarError:
            continue
        if math.isfinite(grammar.log_prob(q)):
            out.append(q)
    return out


class _LatentSearch:
    """State of one PROLAS run: latent data, targets via the Evaluator, counters."""

    def __init__(
        self,
        evaluator: Evaluator,
        trained: TrainedVAE,
        options: LatentBOConfig,
        seed: int,
        batch: int,
        log: Callable[[str], None],
        dataset_name: str | None = None,
    ) -> None:
        self.ev = evaluator
        self.dataset_name = dataset_name
        self.vae = trained
        self.opt = options
        self.seed = seed
        self.batch = batch
        self.log = log
        self.rng = np.random.default_rng(seed)
        bounds = trained.latent_bounds(options.box_quantile, options.box_expand).to(DTYPE)
        self.lo, self.width = bounds[0], (bounds[1] - bounds[0]).clamp_min(1e-9)
        self.d = trained.latent_dim
        self.U: list[torch.Tensor] = []  # unit-cube points, each (d,)
        self.E: list[str] = []  # canonical expression of each point
        # token sequences of points placed by encoding (warm start), for grammar edits
        self.sequence_of: dict[str, tuple[str, ...]] = {}
        self._hypers: dict | None = None  # surrogate hyperparameters of the last step
        self._structural = None  # surrogate="ot": StructuralSurrogate (distance cache)
        self._structural_hypers: dict | None = None
        self.tr_length, self.tr_succ, self.tr_fail = options.tr_init, 0, 0
        self.stats = {
            "bo_steps": 0,
            "free_points": 0,
            "known_proposals": 0,
            "alternates": 0,
            "diversifications": 0,
            "grammar_draws": 0,
            "surrogate_failures": 0,
            "tr_restarts": 0,
            "stopped": "budget",
        }

    # --- coordinates -----------------------------------------------------------------
    def to_unit(self, z: torch.Tensor) -> torch.Tensor:
        return ((z.to(DTYPE) - self.lo) / self.width).clamp(0.0, 1.0)

    def to_latent(self, u: torch.Tensor) -> torch.Tensor:
        return self.lo + u.to(DTYPE) * self.width

    def decode(self, u: torch.Tensor) -> list[Expression]:
        """Most likely expressions of unit-cube points ``b x d``."""
        return self.vae.decode(self.to_latent(u.reshape(-1, self.d)))

    # --- data ------------------------------------------------------------------------
    def targets(self) -> torch.Tensor:
        """``n x 1`` BIC targets; failures get the pessimistic value."""
        evs = [self.ev.lookup(e) for e in self.E]
        ok = [e.bic for e in evs if e is not None and e.ok]
        if not ok:
            return torch.zeros(len(evs), 1, dtype=DTYPE)
        lo, hi = min(ok), max(ok)
        bad = lo - max(1.0, self.opt.margin * (hi - lo))
        return torch.tensor([[e.bic if e is not None and e.ok else bad] for e in evs], dtype=DTYPE)

    def warp(self, Y: torch.Tensor) -> torch.Tensor:
        """Surrogate targets from BIC targets ``n x 1`` (monotone, so the incumbent is kept).

        ``none``: BIC itself. ``clip``: values below the median are raised to the median,
        so a few very poor models (BIC spans hundreds of nats) do not set the surrogate's
        scale and the model resolves differences among the good ones.
        """
        if self.opt.warp == "clip" and Y.shape[0] >= 4:
            return Y.clamp_min(float(Y.median()))
        return Y

    def add(self, u: torch.Tensor, expr: Expression) -> None:
        self.U.append(u.reshape(self.d).to(DTYPE))
        self.E.append(str(expr))

    def evaluate(self, points: list[tuple[torch.Tensor, Expression]]) -> int:
        """Evaluate decoded points; known ones are free. Returns the number of new
        expressions evaluated. Raises BudgetExhausted once the budget is spent (points
        whose expressions were evaluated are still recorded)."""
        exprs = [e for _, e in points]
        new_before = self.ev.n_unique
        best_before = self._best_bic()
        try:
            self.ev.evaluate_many(exprs)
        finally:
            for u, e in points:
                if self.ev.seen(e):
                    self.add(u, e)
        n_new = self.ev.n_unique - new_before
        if n_new:
            self.update_trust_region(self._best_bic() > best_before)
        return n_new

    def _best_bic(self) -> float:
        b = self.ev.best
        return b.bic if b is not None else -math.inf

    # --- initial design --------------------------------------------------------------
    def warm_start_points(self, k: int) -> list[tuple[torch.Tensor, Expression]]:
        """Up to ``k`` new portfolio expressions (:mod:`prolas.search.portfolio`) valid in
        the VAE's grammar, each at the latent code of its token sequence."""
        from prolas.encoding import sequence_to_expression
        from prolas.errors import GrammarError
        from prolas.search.portfolio import BenchmarkScores, excluded_series

        library = BenchmarkScores.load(self.opt.portfolio)
        left_out = excluded_series(self.dataset_name, library.series)
        grammar = self.vae.grammar
        picked: list[tuple[tuple[str, ...], Expression]] = []
        for i in library.select(len(library.expressions), left_out):
            seq = library.sequences[i]
            try:
                grammar.validate_sequence(seq)
            except GrammarError:
                continue  # not in this grammar's search space
            e = sequence_to_expression(seq)
            if math.isfinite(grammar.log_prob(seq)) and not self.ev.seen(e):
                picked.append((seq, e))
            if len(picked) == k:
                break
        if not picked:
            return []
        self.log(
            f"warm start: {len(picked)} portfolio expressions ranked on "
            f"{len(library.series) - len(left_out)} library series"
            + (f" (left out: {', '.join(left_out)})" if left_out else "")
        )
        U = self.to_unit(self.vae.encode_sequences([seq for seq, _ in picked]))
        self.sequence_of.update((str(e), seq) for seq, e in picked)
        return [(u, e) for u, (_, e) in zip(U, picked)]

    def initial_design(self) -> None:
        n = min(self.opt.n_init, self.ev.remaining)
        if self.opt.warm_start:
            warm = self.warm_start_points(min(self.opt.warm_start, n))
            self.evaluate(warm)
            n -= len(warm)
            if n <= 0:
                return
        if self.opt.init == "sobol":
            sobol = torch.quasirandom.SobolEngine(self.d, scramble=True, seed=self.seed)
            pts: list[tuple[torch.Tensor, Expression]] = []
            fresh: set[str] = set()
            while len(fresh) < n and len(pts) < 50 * n:
                u = sobol.draw(1, dtype=DTYPE)[0]
                e = self.decode(u)[0]
                pts.append((u, e))
                if not self.ev.seen(e):
                    fresh.add(str(e))
            self.evaluate(pts)
            return
        pts, keys = [], set()
        draws = 0
        while len(keys) < n and draws < 200 * n:
            s = self.vae.grammar.sample_sequence(self.rng)
            draws += 1
            u = self.to_unit(self.vae.encode_sequences([s]))[0]
            e = self.decode(u)[0]
            if str(e) in keys or self.ev.seen(e):
                continue
            keys.add(str(e))
            pts.append((u, e))
        self.evaluate(pts)

    # --- BO step ---------------------------------------------------------------------
    def propose(self):
        """Fit the surrogate and optimise the acquisition.

        Returns ``(candidates r x q x d, acquisition values r, LogEI)`` best first, where
        LogEI is the analytic log expected improvement of the fitted model (used to rank
        extra candidates), or None if there is nothing to model yet.
        """
        from botorch.acquisition import LogExpectedImprovement, qLogExpectedImprovement
        from botorch.fit import fit_gpytorch_mll
        from botorch.models import SingleTaskGP
        from botorch.models.transforms.outcome import Standardize
        from botorch.optim import optimize_acqf
        from botorch.sampling import SobolQMCNormalSampler
        from gpytorch.mlls import ExactMarginalLogLikelihood

        X = torch.stack(self.U)
        Y = self.warp(self.targets())
        if float(Y.max() - Y.min()) <= 0.0:
            return None  # nothing to model yet (all equal or all failed)
        with _numerics():
            model = SingleTaskGP(X, Y, outcome_transform=Standardize(m=1))
            if self._hypers is not None:
                # warm start from the previous step's hyperparameters (same shapes)
                model.load_state_dict(self._hypers, strict=False)
            mll = ExactMarginalLogLikelihood(model.likelihood, model)
            try:
                fit_gpytorch_mll(mll)
                self._hypers = {
                    k: v.detach().clone()
                    for k, v in model.state_dict().items()
                    if not k.startswith("outcome_transform")
                }
            except Exception:  # ModelFittingError etc.: keep the prior hyperparameters
                self.stats["surrogate_failures"] += 1
                self._hypers = None
            model.eval()
            best_f = float(Y.max())
            log_ei = LogExpectedImprovement(model, best_f=best_f)
            if self.batch == 1:
                acq = log_ei
            else:
                sampler = SobolQMCNormalSampler(
                    torch.Size([self.opt.mc_samples]), seed=int(self.rng.integers(2**31))
                )
                acq = qLogExpectedImprovement(model, best_f=best_f, sampler=sampler)
            bounds = self.search_bounds()
            cands, vals = optimize_acqf(
                acq,
                bounds=bounds,
                q=self.batch,
                num_restarts=self.opt.num_restarts,
                raw_samples=self.opt.raw_samples,
                return_best_only=False,
                options={"seed": int(self.rng.integers(2**31)), "maxiter": 200},
            )
        order = torch.argsort(vals.reshape(-1), descending=True)
        cands = cands.reshape(-1, self.batch, self.d)[order].detach()
        return cands, vals.reshape(-1)[order].detach(), log_ei

    def search_bounds(self) -> torch.Tensor:
        """``2 x d`` box in the unit cube where proposals are sought: the whole cube, or
        with ``trust_region`` a cube of side ``tr_length`` around the incumbent."""
        if not self.opt.trust_region or not self.U:
            return torch.stack([torch.zeros(self.d), torch.ones(self.d)]).to(DTYPE)
        centre = self.U[int(torch.argmax(self.targets()[:, 0]))]
        lo = (centre - self.tr_length / 2).clamp(0.0, 1.0)
        hi = (centre + self.tr_length / 2).clamp(0.0, 1.0)
        return torch.stack([lo, hi])

    def update_trust_region(self, improved: bool) -> None:
        """TuRBO-style: double after ``tr_success`` improving evaluations in a row, halve
        after ``tr_failure`` non-improving ones; reset when it falls below ``tr_min``."""
        if not self.opt.trust_region:
            return
        if improved:
            self.tr_succ, self.tr_fail = self.tr_succ + 1, 0
        else:
            self.tr_succ, self.tr_fail = 0, self.tr_fail + 1
        if self.tr_succ >= self.opt.tr_success:
            self.tr_length, self.tr_succ = min(2 * self.tr_length, 1.0), 0
        elif self.tr_fail >= self.opt.tr_failure:
            self.tr_length, self.tr_fail = self.tr_length / 2, 0
            if self.tr_length < self.opt.tr_min:
                self.tr_length = self.opt.tr_init
                self.stats["tr_restarts"] += 1

    def candidate_pool(self, restarts: torch.Tensor) -> torch.Tensor:
        """Extra candidates ``m x d`` for proposals that must decode to new expressions:
        the other restart points, a Sobol design of the cube and Gaussian perturbations
        of the best points so far (several scales)."""
        parts = [restarts.reshape(-1, self.d)]
        if self.opt.pool_sobol:
            sobol = torch.quasirandom.SobolEngine(
                self.d, scramble=True, seed=int(self.rng.integers(2**31))
            )
            lo, hi = self.search_bounds()
            parts.append(lo + (hi - lo) * sobol.draw(self.opt.pool_sobol, dtype=DTYPE))
        if (self.opt.pool_local or self.opt.pool_edits) and self.U:
            tg = self.targets()[:, 0]
            top = torch.argsort(tg, descending=True)[: self.opt.pool_top].tolist()
            if self.opt.pool_local:
                per = max(1, self.opt.pool_local // (len(top) * len(self.opt.perturb_scales)))
                for i in top:
                    for scale in self.opt.perturb_scales:
                        noise = torch.from_numpy(self.rng.normal(0.0, scale, (per, self.d)))
                        parts.append((self.U[i] + noise).clamp(0.0, 1.0))
            if self.opt.pool_edits:
                seqs = self.vae.decode_sequences(
                    self.to_latent(torch.stack([self.U[i] for i in top]))
                )
                # a point placed by encoding edits its own sequence, not its decode
                seqs = [self.sequence_of.get(self.E[i], q) for i, q in zip(top, seqs)]
                edits = sorted({n for q in seqs for n in sequence_edits(q, self.vae.grammar)})
                if edits:
                    parts.append(self.to_unit(self.vae.encode_sequences(edits)))
        if self.opt.pool_grammar:
            draws = self.vae.grammar.sample_sequences(self.opt.pool_grammar, self.rng)
            parts.append(self.to_unit(self.vae.encode_sequences(draws)))
        return torch.cat(parts).to(DTYPE)

    def best_new(
        self, pool: torch.Tensor, log_ei, k: int, exclude: set[str]
    ) -> list[tuple[torch.Tensor, Expression]]:
        """Up to ``k`` pool points decoding to distinct new expressions, highest LogEI first."""
        exprs = self.decode(pool)
        keep = [i for i, e in enumerate(exprs) if not self.ev.seen(e) and str(e) not in exclude]
        if not keep:
            return []
        with _numerics(), torch.no_grad():
            vals = torch.cat(
                [log_ei(pool[keep][j : j + 512].unsqueeze(1)) for j in range(0, len(keep), 512)]
            )
        out: list[tuple[torch.Tensor, Expression]] = []
        taken: set[str] = set()
        for j in torch.argsort(vals, descending=True).tolist():
            e = exprs[keep[j]]
            if str(e) in taken:
                continue
            taken.add(str(e))
            out.append((pool[keep[j]], e))
            if len(out) == k:
                break
        return out

    def step(self) -> int:
        """One BO iteration; returns the number of new expressions evaluated."""
        self.stats["bo_steps"] += 1
        if self.opt.surrogate == "ot":
            return self.step_expression_surrogate()
        prop = self.propose()
        if prop is None:
            return self.diversify()
        cands, _, log_ei = prop
        top = cands[0]  # q x d
        exprs = self.decode(top)
        known = [(u, e) for u, e in zip(top, exprs) if self.ev.seen(e)]
        fresh: list[tuple[torch.Tensor, Expression]] = []
        for u, e in zip(top, exprs):
            if not self.ev.seen(e) and all(str(e) != str(f) for _, f in fresh):
                fresh.append((u, e))
            elif not self.ev.seen(e):
                known.append((u, e))  # a duplicate inside the batch: scored once
        self.stats["known_proposals"] += len(known)
        if self.opt.pool_always and self.batch == 1 and self.opt.duplicates == "pool":
            # maximise LogEI over the optimiser's candidates and the pool together,
            # restricted to new expressions (not only when the best point is known)
            fresh = []
        missing = self.batch - len(fresh)
        if missing and self.opt.duplicates == "restarts":
            # the best restart batch that decodes to something new
            for batch in cands[1:]:
                ex = self.decode(batch)
                extra = [(u, e) for u, e in zip(batch, ex) if not self.ev.seen(e)]
                extra = [(u, e) for u, e in extra if all(str(e) != str(f) for _, f in fresh)]
                if extra:
                    self.stats["alternates"] += 1
                    fresh += extra[:missing]
                    break
        elif missing and self.opt.duplicates == "pool":
            rest = cands if self.opt.pool_always else cands[1:]
            extra = self.best_new(
                self.candidate_pool(rest), log_ei, missing, {str(e) for _, e in fresh}
            )
            self.stats["alternates"] += len(extra)
            fresh += extra
        new_before = self.ev.n_unique
        try:
            self.evaluate(fresh)
        finally:
            # known decodes join the data at no cost (after the new ones: a batch
            # duplicate of a new expression needs its score)
            for u, e in known:
                if self.ev.seen(e):
                    self.add(u, e)
        return self.ev.n_unique - new_before

    def step_expression_surrogate(self) -> int:
        """One step with the OT-kernel GP on decoded expressions (``surrogate="ot"``).

        The GP is fitted on the distinct evaluated expressions (targets as in
        :meth:`targets`); the candidates are the new expressions decoded from
        :meth:`candidate_pool` (the VAE is the proposal generator: every candidate is
        the decode of a latent point); the ``batch`` candidates of highest LogEI are
        evaluated (greedy top-q, not a joint qEI)."""
        import gpytorch

        from prolas.encoding import sequence_to_expression
        from prolas.errors import NumericsWarning
        from prolas.surrogates.model import StructuralSurrogate, fit_gp, log_ei

        if self._structural is None:
            self._structural = StructuralSurrogate("ot", self.vae.grammar)
        sur = self._structural
        Y = self.targets()[:, 0]
        target = dict(zip(self.E, Y.tolist()))  # one row per distinct expression
        exprs, ys = list(target), list(target.values())
        if len(exprs) < 2 or max(ys) - min(ys) <= 0.0:
            return self.diversify()
        # penalty="exact": model log-likelihood = BIC + k/2 ln N, subtract the known penalty
        half_log_n = self._half_log_n() if self.opt.penalty == "exact" else 0.0
        sizes = [parse(e).n_params for e in exprs]
        fit_ys = [y + half_log_n * k for k, y in zip(sizes, ys)]
        trend = size_trend(sizes, fit_ys) if self.opt.size_trend else (0.0, 0.0)
        fit_ys = [y - trend[0] - trend[1] * k for k, y in zip(sizes, fit_ys)]
        pool = self.candidate_pool(torch.empty(0, self.d, dtype=DTYPE))
        seqs = self.vae.decode_sequences(self.to_latent(pool))
        cands: dict[str, tuple[torch.Tensor, Expression]] = {}
        log_prior: dict[str, float] = {}  # best grammar log-probability per expression
        for u, q in zip(pool, seqs):
            e = sequence_to_expression(q)
            if not self.ev.seen(e):
                key = str(e)
                cands.setdefault(key, (u, e))
                if self.opt.prior_weight:
                    lp = self.vae.grammar.log_prob(q)
                    log_prior[key] = max(lp, log_prior.get(key, -math.inf))
        if not cands:
            return self.diversify()
        with warnings.catch_warnings():
            # indefinite-Gram repairs and GPyTorch jitter are routine for the OT kernel
            warnings.simplefilter("ignore", NumericsWarning)
            warnings.simplefilter("ignore", gpytorch.utils.warnings.NumericalWarning)
            try:
                fit = fit_gp(
                    sur.new_kernel(),
                    sur.encode_expressions(exprs),
                    fit_ys,
                    max_iter=50,
                    init=self._structural_hypers,
                )
                self._structural_hypers = fit.hyperparameters()
                cand_list = list(cands.values())
                mean, var = fit.predict(
                    sur.encode_expressions([e for _, e in cand_list]), joint=False
                )
                k = torch.tensor([e.n_params for _, e in cand_list], dtype=mean.dtype)
                mean = mean + trend[0] + (trend[1] - half_log_n) * k
                vals = log_ei(mean, var, max(ys))
                if self.opt.prior_weight:
                    lp = torch.tensor([log_prior[str(e)] for _, e in cand_list], dtype=vals.dtype)
                    vals = vals + self.opt.prior_weight / len(exprs) * lp
            except Exception:  # a surrogate failure must not end the search
                self.stats["surrogate_failures"] += 1
                self._structural_hypers = None
                return self.diversify()
        order = torch.argsort(vals, descending=True)[: self.batch].tolist()
        return self.evaluate([cand_list[i] for i in order])

    def _half_log_n(self) -> float:
        """``1/2 ln N`` of the data, read off a successful evaluation as
        ``(log_likelihood - BIC) / k`` (0 for objectives that are not a BIC)."""
        for key in self.E:
            e = self.ev.lookup(key)
            if e is not None and e.ok and e.log_likelihood is not None and e.n_params > 0:
                return max(0.0, (e.log_likelihood - e.bic) / e.n_params)
        return 0.0

    def diversify(self) -> int:
        """Evaluate something new: perturb the incumbent, else draw from the grammar."""
        self.stats["diversifications"] += 1
        if self.E:
            tg = self.targets()[:, 0]
            best_u = self.U[int(torch.argmax(tg))]
            for scale in self.opt.perturb_scales:
                for _ in range(self.opt.perturb_tries):
                    step = torch.from_numpy(self.rng.normal(0.0, scale, self.d))
                    u = (best_u + step).clamp(0.0, 1.0)
                    e = self.decode(u)[0]
                    if not self.ev.seen(e):
                        return self.evaluate([(u, e)])
        from prolas.encoding import sequence_to_expression

        for _ in range(self.opt.grammar_tries):
            s = self.vae.grammar.sample_sequence(self.rng)
            self.stats["grammar_draws"] += 1
            if self.ev.seen(sequence_to_expression(s)):
                continue
            u = self.to_unit(self.vae.encode_sequences([s]))[0]
            e = self.decode(u)[0]
            if self.ev.seen(e):
                # the decoder cannot reach this expression (e.g. a poorly trained
                # VAE): evaluate the grammar sample itself at its latent code
                e = sequence_to_expression(s)
            return self.evaluate([(u, e)])
        return 0

    def run(self) -> None:
        start = self.ev.n_unique
        try:
            self._run()
        finally:
            self.stats["free_points"] = len(self.U) - (self.ev.n_unique - start)

    def _run(self) -> None:
        self.initial_design()
        stall = 0
        max_steps = self.opt.max_steps_factor * self.ev.budget
        steps = 0
        while not self.ev.exhausted:
            if steps >= max_steps:
                self.stats["stopped"] = f"step cap ({max_steps} steps)"
                break
            steps += 1
            new = self.step() if stall < self.opt.stall_limit else self.diversify()
            if new:
                stall = 0
            else:
                stall += 1
                if stall > self.opt.stall_limit + 1:
                    self.stats["stopped"] = "no new expressions found"
                    break


def search_prolas(
    evaluator: Evaluator,
    dataset: Dataset | None,
    config: SearchConfig,
    *,
    log: Callable[[str], None] | None = None,
    trained: TrainedVAE | None = None,
    options: LatentBOConfig | None = None,
) -> SearchResult:
    """Run PROLAS through ``evaluator`` until its budget is spent.

    Args:
        evaluator: the shared Evaluator (cache, budget, history); the only source of
            scores.
        dataset: the data (needed only for ``config.train_vae``).
        config: search settings: ``seed``, ``batch`` (q), ``checkpoint``, ``train_vae``,
            ``grammar``.
        log: receives one-line progress messages.
        trained: a loaded/trained KG-VAE to use instead of ``config.checkpoint``.
        options: BO-loop settings (:class:`LatentBOConfig`).

    Returns:
        The common :class:`SearchResult`; ``extra`` records the checkpoint, the latent
        dimension and box, the options and the loop counters.
    """
    log = log or (lambda s: None)
    options = options or LatentBOConfig()
    if trained is None:
        trained = resolve_vae(dataset, config, log)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        state = _LatentSearch(
            evaluator,
            trained,
            options,
            config.seed,
            config.batch,
            log,
            dataset_name=dataset.name if dataset is not None else None,
        )
        try:
            state.run()
        except BudgetExhausted:
            pass
    st = state.stats
    log(
        f"PROLAS ({options.surrogate} surrogate): {evaluator.n_unique} evaluations, "
        f"{st['bo_steps']} BO steps, "
        f"{st['free_points']} proposals decoded to known expressions, "
        f"{st['diversifications']} diversifications"
    )
    extra = {
        "checkpoint": "trained" if config.train_vae else str(config.checkpoint),
        "latent_dim": trained.latent_dim,
        "latent_box": torch.stack([state.lo, state.lo + state.width]).tolist(),
        "batch": config.batch,
        "n_points": len(state.U),
        "options": {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(options).items()
        },
        **st,
    }
    return evaluator.result("prolas", config.seed, extra)
