"""Laws of the structural surrogates (the papers' own claims).

* every kernel's Gram matrix is PSD on random configurations (random hyperparameters,
  random garbage in inactive dimensions);
* arc / hierarchical per-dimension distances equal the closed forms in the three
  activity cases;
* kernel values do not depend on the values stored in inactive dimensions;
* the conditional kernel is zero across branches and its blockwise solve equals the
  dense solve;
* the OT distance is symmetric, zero on identical expressions, satisfies the
  triangle inequality (d), and d_bar <= 1; the OT kernel repairs indefiniteness.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from conftest import ROOT, assert_ot_pseudometric

from prolas.errors import NumericsWarning
from prolas.expr import parse
from prolas.grammar import Grammar
from prolas.surrogates import (
    SURROGATES,
    ArcKernel,
    ConditionalKernel,
    ConditionalSpace,
    ExpressionRegistry,
    HierarchicalKernel,
    LaplaceKernel,
    OTConfig,
    OTKernel,
    Slot,
    StructuralSurrogate,
    blockwise_solve,
    dense_solve,
)

torch.set_num_threads(1)

GRAMMAR = Grammar.default()
FEATURE_BOUNDS = [(0.0, 2.0), (-1.0, 1.0)]
SPACE = ConditionalSpace.from_grammar(GRAMMAR, n_features=2, feature_bounds=FEATURE_BOUNDS)


def random_rows(rng: np.random.Generator, n: int, space: ConditionalSpace = SPACE) -> torch.Tensor:
    """Encoded random grammar sequences with random features and garbage in inactive dims."""
    seqs = GRAMMAR.sample_sequences(n, rng)
    feats = np.column_stack([rng.uniform(lo, hi, n) for lo, hi in FEATURE_BOUNDS])
    x = space.encode(seqs, feats)
    return scramble_inactive(x, space, rng)


def scramble_inactive(x: torch.Tensor, space: ConditionalSpace, rng) -> torch.Tensor:
    values, delta = space.split(x)
    garbage = torch.as_tensor(rng.integers(-5, 9, size=values.shape), dtype=x.dtype)
    out = x.clone()
    out[:, : space.dim] = torch.where(delta, values, garbage + torch.rand(values.shape).double())
    return out


def randomise(kernel: torch.nn.Module, rng: np.random.Generator) -> None:
    """Random raw hyperparameters (every value maps inside its constraint)."""
    with torch.no_grad():
        for _, p in kernel.named_parameters():
            p.copy_(torch.as_tensor(rng.normal(0.0, 1.5, size=p.shape), dtype=p.dtype))


def vector_kernels() -> list[tuple[str, torch.nn.Module]]:
    ks = []
    for base in ("se", "matern52", "rq"):
        ks.append((f"arc-{base}", ArcKernel(SPACE, base=base)))
        for combine in ("product", "sum"):
            ks.append((f"hier-{combine}-{base}", HierarchicalKernel(SPACE, combine, base)))
    ks.append(("conditional-activity", ConditionalKernel(SPACE)))
    ks.append(("conditional-values", ConditionalKernel(SPACE, branches="values")))
    ks.append(("laplace", LaplaceKernel(SPACE)))
    return [(n, k.double()) for n, k in ks]


KERNELS = vector_kernels()


# --- PSD -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name,kernel", KERNELS, ids=[n for n, _ in KERNELS])
def test_gram_matrix_is_psd_on_random_configurations(name, kernel):
    rng = np.random.default_rng(0)
    for _ in range(3):
        randomise(kernel, rng)
        x = random_rows(rng, 60)
        with torch.no_grad():
            k = kernel(x).to_dense()
        assert torch.allclose(k, k.T, atol=1e-12)
        lam = torch.linalg.eigvalsh(k)[0].item()
        assert lam >= -1e-9 * max(1.0, k.diagonal().max().item()), (name, lam)
        # diag mode agrees with the full matrix
        with torch.no_grad():
            d = kernel(x, diag=True)
        assert torch.allclose(d, k.diagonal(), atol=1e-12)


def test_ot_kernel_gram_is_psd_after_repair():
    rng = np.random.default_rng(1)
    reg = ExpressionRegistry()
    exprs = [GRAMMAR.sample(rng) for _ in range(60)]
    x = torch.tensor(reg.indices(exprs), dtype=torch.float64).reshape(-1, 1)
    for indefinite in ("jitter", "clip"):
        kern = OTKernel(reg, indefinite=indefinite).double()
        for _ in range(4):
            randomise(kern, rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", NumericsWarning)
                with torch.no_grad():
                    k = kern(x).to_dense()
            lam = torch.linalg.eigvalsh(k)[0].item()
            assert lam >= -1e-9 * k.abs().max().item()


def test_ot_kernel_warns_and_repairs_an_indefinite_gram_matrix():
    # e^{-beta d} is PSD for every beta only if d is of negative type, which OTMANN's d
    # is not: at small beta the Gram matrix of random expressions is indefinite.
    rng = np.random.default_rng(2)
    reg = ExpressionRegistry()
    exprs = list({str(GRAMMAR.sample(rng)) for _ in range(150)})
    idx = np.asarray(reg.indices(exprs))
    found = None
    d, db = reg.distances(idx, idx)
    for a, b, ab, bb in [(1, 0.05, 1e-4, 1), (1, 0.1, 1e-4, 1), (1e-4, 1, 1, 1)]:
        lam = np.linalg.eigvalsh(a * np.exp(-b * d) + ab * np.exp(-bb * db))[0]
        if lam < -1e-6:
            found = (a, b, ab, bb)
            break
    assert found is not None, "expected an indefinite OT Gram matrix for some hyperparameters"
    kern = OTKernel(reg).double()
    for name, v in zip(("alpha", "beta", "alpha_bar", "beta_bar"), found):
        kern._set(name, v)
    x = torch.tensor(idx, dtype=torch.float64).reshape(-1, 1)
    with pytest.warns(NumericsWarning, match="indefinite"):
        with torch.no_grad():
            k = kern(x).to_dense()
    assert kern.last_min_eigenvalue < 0
    assert torch.linalg.eigvalsh(k)[0].item() >= -1e-9


# --- closed forms -----------------------------------------------------------------------------
def toy_space() -> ConditionalSpace:
    """A categorical root (3 choices), a real child, a categorical grandchild (4 choices)."""
    slots = [
        Slot("c", "categorical", ("a", "b", "c"), (), (0.0, 2.0)),
        Slot("r", "real", (), (0,), (-2.0, 3.0)),
        Slot("k", "categorical", ("w", "x", "y", "z"), (0,), (0.0, 3.0)),
    ]
    return ConditionalSpace(slots, max_operations=0)


def row(space, values, active):
    return torch.tensor([list(values) + [float(a) for a in active]], dtype=torch.float64)


def test_hierarchical_distance_matches_closed_forms_in_all_activity_cases():
    space = toy_space()
    rng = np.random.default_rng(3)
    kern = HierarchicalKernel(space).double()
    for _ in range(20):
        gamma = rng.uniform(0.05, 1.0, 3)
        rho = rng.uniform(0.05, 1.0, 3)
        kern.gamma = torch.tensor(gamma)
        kern.rho = torch.tensor(rho)
        omega = [gamma[0], gamma[0] * gamma[1], gamma[0] * gamma[2]]  # anc(r) = anc(k) = {c}
        assert np.allclose(kern.omega.detach().numpy(), omega)
        v1 = [float(rng.integers(3)), rng.uniform(-2, 3), float(rng.integers(4))]
        v2 = [float(rng.integers(3)), rng.uniform(-2, 3), float(rng.integers(4))]
        for a1, a2 in [(0, 0), (1, 0), (0, 1), (1, 1)]:
            act1, act2 = [1, a1, a1], [1, a2, a2]
            d = kern.dim_distances(row(space, v1, act1), row(space, v2, act2))[0, 0]
            d = d.detach().numpy()
            # real dimension r (index 1), Prop. 3
            w = omega[1]
            if a1 == a2 == 0:
                exp_r = 0.0
            elif a1 != a2:
                exp_r = w
            else:
                delta = (v1[1] - v2[1]) / 5.0
                exp_r = w * math.sqrt(2) * math.sqrt(1 - math.cos(math.pi * rho[1] * delta))
            assert d[1] == pytest.approx(exp_r, abs=1e-12)
            # categorical dimension k (index 2, m = 4), Prop. 4 with general rho
            w = omega[2]
            if a1 == a2 == 0:
                exp_k = 0.0
            elif a1 != a2:
                exp_k = w * math.sqrt(1 + 3 * (1 - rho[2]) ** 2)
            else:
                exp_k = w * rho[2] * math.sqrt(2) * float(v1[2] != v2[2])
            assert d[2] == pytest.approx(exp_k, abs=1e-12)
    # at rho = 1 the categorical case is the paper's: omega, omega sqrt(2) 1[x != x']
    kern.rho = torch.ones(3)
    g = kern.omega.detach().numpy()
    one = kern.dim_distances(row(space, [0, 0, 1], [1, 1, 1]), row(space, [0, 0, 2], [1, 0, 0]))
    both = kern.dim_distances(row(space, [0, 0, 1], [1, 1, 1]), row(space, [0, 0, 2], [1, 1, 1]))
    assert one[0, 0, 2].item() == pytest.approx(g[2], abs=1e-12)
    assert both[0, 0, 2].item() == pytest.approx(g[2] * math.sqrt(2), abs=1e-12)


def test_arc_distance_matches_closed_forms_in_all_activity_cases():
    space = toy_space()
    rng = np.random.default_rng(4)
    kern = ArcKernel(space).double()
    for _ in range(20):
        omega = rng.uniform(0.1, 3.0, 3)
        rho = rng.uniform(0.05, 1.0, 3)
        kern.omega = torch.tensor(omega)
        kern.rho = torch.tensor(rho)
        v1 = [float(rng.integers(3)), rng.uniform(-2, 3), float(rng.integers(4))]
        v2 = [float(rng.integers(3)), rng.uniform(-2, 3), float(rng.integers(4))]
        for a1, a2 in [(0, 0), (1, 0), (0, 1), (1, 1)]:
            d = kern.dim_distances(row(space, v1, [1, a1, a1]), row(space, v2, [1, a2, a2]))
            d = d[0, 0].detach().numpy()
            for i, span in ((1, 5.0), (2, 3.0)):  # real r; categorical k as ordinal / (m-1)
                if a1 == a2 == 0:
                    expected = 0.0
                elif a1 != a2:
                    expected = omega[i]
                else:
                    delta = (v1[i] - v2[i]) / span
                    c = math.cos(math.pi * rho[i] * delta)
                    expected = omega[i] * math.sqrt(2) * math.sqrt(1 - c)
                assert d[i] == pytest.approx(expected, abs=1e-12)
        # and the kernel is the radial profile of the total distance
        x1, x2 = row(space, v1, [1, 1, 0]), row(space, v2, [1, 1, 1])
        r2 = (kern.dim_distances(x1, x2) ** 2).sum().item()
        assert kern(x1, x2).to_dense().item() == pytest.approx(math.exp(-0.5 * r2), rel=1e-12)


# --- inactive dimensions do not matter ----------------------------------------------------
@pytest.mark.parametrize("name,kernel", KERNELS, ids=[n for n, _ in KERNELS])
def test_kernel_value_ignores_values_of_inactive_dimensions(name, kernel):
    rng = np.random.default_rng(5)
    randomise(kernel, rng)
    x = random_rows(rng, 40)
    x2 = scramble_inactive(x, SPACE, np.random.default_rng(6))
    assert not torch.equal(x, x2)  # the scramble did change stored values
    with torch.no_grad():
        k1 = kernel(x).to_dense()
        k2 = kernel(x2).to_dense()
        k3 = kernel(x, x2).to_dense()
    assert torch.allclose(k1, k2, atol=1e-13, rtol=0)
    assert torch.allclose(k1, k3, atol=1e-13, rtol=0)


# --- conditional kernel ---------------------------------------------------------------------
def test_conditional_kernel_is_zero_across_branches_and_positive_within():
    rng = np.random.default_rng(7)
    kern = ConditionalKernel(SPACE).double()
    x = random_rows(rng, 80)
    groups = kern.groups(x)
    n_active = SPACE.active(x)[:, : SPACE.n_slots].sum(-1)
    with torch.no_grad():
        k = kern(x).to_dense()
    same = groups[:, None] == groups[None, :]
    assert torch.equal(same, n_active[:, None] == n_active[None, :])
    assert torch.all(k[~same] == 0)
    assert torch.all(k[same] > 0)
    assert len(torch.unique(groups)) > 2


@pytest.mark.parametrize("branches", ["activity", "values"])
def test_blockwise_solve_equals_dense_solve(branches):
    rng = np.random.default_rng(8)
    kern = ConditionalKernel(SPACE, branches=branches).double()
    randomise(kern, rng)
    x = random_rows(rng, 120)
    y = torch.as_tensor(rng.normal(size=120))
    for noise in (1e-3, 0.3):
        a_dense, ld_dense = dense_solve(kern, x, y, noise)
        a_block, ld_block = blockwise_solve(kern, x, y, noise)
        assert torch.allclose(a_block, a_dense, atol=1e-8, rtol=0)
        assert ld_block.item() == pytest.approx(ld_dense.item(), abs=1e-8)
    ys = torch.as_tensor(rng.normal(size=(120, 3)))
    assert torch.allclose(blockwise_solve(kern, x, ys, 0.1)[0], dense_solve(kern, x, ys, 0.1)[0])


# --- OT distance ------------------------------------------------------------------------------
def test_ot_distance_is_symmetric_zero_on_identical_and_a_metric():
    rng = np.random.default_rng(9)
    assert_ot_pseudometric([GRAMMAR.sample(rng) for _ in range(45)])


def test_ot_distance_is_a_pseudometric_with_white_noise_and_centred_periodic():
    """The abcd grammar's kernels: their label costs keep the triangle inequality
    (OTConfig checks M), and PERC sits nearer PER than SE does."""
    rng = np.random.default_rng(11)
    abcd = Grammar.from_file("abcd")
    assert_ot_pseudometric([abcd.sample(rng) for _ in range(45)])
    reg = ExpressionRegistry()
    i = reg.indices([parse("PER"), parse("PERC"), parse("SE"), parse("LIN*WN"), parse("LIN")])
    d, _ = reg.distances(i, i)
    assert d[0, 1] < d[0, 2] and d[3, 4] > 0


def test_ot_distance_orders_similar_expressions_closer():
    reg = ExpressionRegistry()
    i = reg.indices([parse("SE"), parse("RQ"), parse("PER"), parse("SE + PER"), parse("LIN*PER")])
    d, _ = reg.distances(i, i)
    assert d[0, 1] < d[0, 2]  # SE is closer to RQ than to PER (label costs)
    assert d[0, 3] < d[0, 4]  # and closer to SE + PER than to LIN*PER
    # the known degeneracy of the graph view: which leaves share a product is not seen
    a, b = reg.indices([parse("PER*PER*RQ + PER*RQ*RQ*SE"), parse("PER*PER*RQ*SE + PER*RQ*RQ")])
    assert reg.distances([a], [b])[0][0, 0] == pytest.approx(0.0, abs=1e-12)


def test_ot_config_refuses_label_costs_that_break_the_triangle_inequality():
    with pytest.raises(ValueError, match="triangle"):
        OTConfig(kernel_costs={("RQ", "SE"): 0.1, ("PER", "RQ"): 0.1, ("PER", "SE"): 0.9})
    with pytest.raises(ValueError, match="infinity"):
        OTConfig(infinity=1.0)


# --- usable in an ExactGP ---------------------------------------------------------------------
@pytest.mark.parametrize("name", SURROGATES)
def test_every_surrogate_fits_an_exact_gp_and_predicts(name):
    rng = np.random.default_rng(10)
    seqs = GRAMMAR.sample_sequences(40, rng)
    # a target that depends on structure: number of PER factors minus size
    y = [2.0 * s.count("PER") - 0.5 * len(s) for s in seqs]
    s = StructuralSurrogate(name, GRAMMAR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        fit = s.fit(seqs[:30], y[:30])
        mu, var = fit.predict(s.encode(seqs[30:]))
        mu_train, _ = fit.predict(s.encode(seqs[:30]))
        lei = fit.log_ei(s.encode(seqs[30:]), max(y[:30]))
    assert math.isfinite(fit.mll)
    assert torch.all(torch.isfinite(mu)) and torch.all(var > 0)
    assert torch.all(torch.isfinite(lei))
    # the fit explains its training data far better than the mean does
    resid = np.mean((mu_train.numpy() - np.asarray(y[:30])) ** 2)
    assert resid < 0.25 * np.var(y[:30])
    for p in fit.model.parameters():
        assert p.dtype == torch.float64


def test_log_ei_matches_closed_form_and_is_finite_in_the_far_tail():
    from scipy.stats import norm

    from prolas.surrogates import log_ei

    mu = torch.tensor([0.0, 1.0, -2.0, 0.3, -40.0], dtype=torch.float64)
    var = torch.tensor([1.0, 0.25, 4.0, 0.01, 1.0], dtype=torch.float64)
    best = 0.5
    got = log_ei(mu, var, best).numpy()
    s = np.sqrt(var.numpy()[:4])
    z = (mu.numpy()[:4] - best) / s
    ref = np.log(s * (norm.pdf(z) + z * norm.cdf(z)))
    assert np.allclose(got[:4], ref[:4], rtol=1e-10)
    assert np.isfinite(got[4]) and got[4] < got[2]


def test_ot_cross_only_prediction_matches_joint_on_training_expressions() -> None:
    """predict(joint=False) (training Gram repaired alone, n x m cross distances) agrees with
    the joint prediction at the training expressions and stays a valid posterior elsewhere:
    finite means, variances in (0, prior variance]."""
    from prolas.grammar import Grammar
    from prolas.surrogates.model import StructuralSurrogate, fit_surrogate

    g = Grammar.default()
    exprs = list(
        dict.fromkeys(
            str(g.to_expression(s)) for s in g.sample_sequences(200, np.random.default_rng(0))
        )
    )
    train, test = exprs[:15], exprs[15:45]
    sur = StructuralSurrogate("ot", g)
    fit = fit_surrogate(
        sur.new_kernel(), sur.encode_expressions(train), [len(e) for e in train], 30
    )
    xt = sur.encode_expressions(train)
    assert torch.allclose(fit.predict(xt, joint=False)[0], fit.predict(xt)[0], atol=1e-8)
    mu, var = fit.predict(sur.encode_expressions(test), joint=False)
    kern = fit.model.covar_module
    prior = float(kern.forward(xt, xt).diagonal().max().detach()) * fit.y_std**2
    assert torch.isfinite(mu).all() and (var > 0).all() and (var <= prior * (1 + 1e-9)).all()


def test_fast_emd_cost_equals_pot_emd() -> None:
    """The direct network-simplex call gives ot.emd's optimal cost on expression graphs."""
    import ot

    from prolas.surrogates.ot import OTConfig, _emd_cost, expression_graph

    config = OTConfig()
    lm = config.label_matrix()
    rng = np.random.default_rng(0)
    grammar = Grammar.default()
    for _ in range(30):
        g1 = expression_graph(grammar.sample(rng), config)
        g2 = expression_graph(grammar.sample(rng), config)
        (l1, m1, _), (l2, m2, _) = g1.support, g2.support
        n1, n2 = len(m1), len(m2)
        c = np.ones((n1 + 1, n2 + 1))
        c[:n1, :n2] = lm[np.ix_(l1, l2)] + rng.uniform(0, 1, (n1, n2))
        c[n1, n2] = 0.0
        a = np.append(m1, g2.total_mass)
        b = np.append(m2, g1.total_mass)
        expected = float((ot.emd(a, b, c) * c).sum())
        assert _emd_cost(a, b, c) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def _reference_path_lengths(graph) -> np.ndarray:
    """Shortest/longest/random-walk hops from ip and to op, straight from the edges."""
    n = len(graph.labels)
    parents = {v: [u for u, w in graph.edges if w == v] for v in range(n)}
    children = {u: [w for v, w in graph.edges if v == u] for u in range(n)}
    out = np.zeros((n, 6))
    for u in range(1, n):
        if parents[u]:
            ps = out[parents[u]]
            out[u, :3] = 1 + ps[:, 0].min(), 1 + ps[:, 1].max(), 1 + ps[:, 2].mean()
    for u in reversed(range(n - 1)):
        if children[u]:
            cs = out[children[u]]
            out[u, 3:] = 1 + cs[:, 3].min(), 1 + cs[:, 4].max(), 1 + cs[:, 5].mean()
    return out


def test_registry_distances_equal_pairwise_ot_to_the_bit() -> None:
    """The registry's batched rows (one broadcast of node costs per row, either
    orientation) give exactly the pairwise otmann_distance of the ordered pair, and the
    graphs' path lengths equal a direct numpy computation from their edges."""
    from prolas.surrogates.ot import ExpressionRegistry, otmann_distance

    rng = np.random.default_rng(3)
    grammar = Grammar.from_file(ROOT / "grammars" / "change.toml")
    exprs = list(dict.fromkeys(str(grammar.sample(rng)) for _ in range(80)))
    reg = ExpressionRegistry()
    idx = reg.indices(exprs)
    train, cands = idx[:20], idx[20:]
    reg.distances(train, train)
    d, db = reg.distances(cands, train)  # new rows against older ones: i > j
    d2, _ = reg.distances(train[:5], cands)  # older rows against newer ones: i < j
    for a, i in enumerate(cands):
        for b, j in enumerate(train):
            assert (d[a, b], db[a, b]) == otmann_distance(reg.graphs[j], reg.graphs[i])
    for a, i in enumerate(train[:5]):
        for b, j in enumerate(cands):
            assert d2[a, b] == otmann_distance(reg.graphs[i], reg.graphs[j])[0]
    for g in reg.graphs:
        assert np.array_equal(g.paths, _reference_path_lengths(g))


def test_node_types_that_arrive_between_requests_keep_distances_to_the_bit() -> None:
    """The node costs between types are kept and grow with new types (rows and columns
    added, capacity doubled): distances asked in rounds, each bringing expressions of
    new node types, are the pairwise otmann_distance to the bit."""
    from prolas.surrogates.ot import otmann_distance

    rng = np.random.default_rng(8)
    grammar = Grammar.from_file(ROOT / "grammars" / "abcd.toml")
    exprs = list(dict.fromkeys(str(grammar.sample(rng)) for _ in range(150)))
    reg = ExpressionRegistry()
    first = reg.indices(exprs[:10])
    reg.anchor(first)
    types_before = len(reg._type_of)
    for lo in range(10, len(exprs), 35):
        new = reg.indices(exprs[lo : lo + 35])
        d, db = reg.distances(new, first)
        for a, i in enumerate(new):
            for b, j in enumerate(first):
                assert (d[a, b], db[a, b]) == otmann_distance(reg.graphs[j], reg.graphs[i])
    assert len(reg._type_of) > 64 > types_before  # the capacity of the costs grew


def test_anchored_distances_equal_pairwise_ot_to_the_bit() -> None:
    """Distances kept densely for anchors (a surrogate's training expressions) are the
    per-pair otmann_distance of the ordered pair to the bit, however the anchors and the
    pairs arrive: anchors declared in two rounds, a pair cached before its expression
    became an anchor, blocks asked in either orientation, single pairs."""
    from prolas.surrogates.ot import otmann_distance

    rng = np.random.default_rng(5)
    grammar = Grammar.from_file(ROOT / "grammars" / "change.toml")
    exprs = list(dict.fromkeys(str(grammar.sample(rng)) for _ in range(160)))
    reg = ExpressionRegistry()
    idx = reg.indices(exprs)
    train, cands = idx[60:90], idx
    early = reg.pair(idx[0], train[3])  # in the pair dictionary before anchoring
    reg.anchor(train[:12])
    reg.distances(cands[:40], train[:12])
    reg.anchor(train)  # more anchors, whose pairs with the first ones are known
    assert reg.anchors == tuple(train)
    d, db = reg.distances(cands, train)
    dt, dbt = reg.distances(train, cands)
    np.testing.assert_array_equal(d, dt.T)
    np.testing.assert_array_equal(db, dbt.T)
    for a, i in enumerate(cands):
        for b, j in enumerate(train):
            g1, g2 = reg.graphs[min(i, j)], reg.graphs[max(i, j)]
            ref = (0.0, 0.0) if i == j else otmann_distance(g1, g2)
            assert (d[a, b], db[a, b]) == ref
            assert reg.pair(i, j) == ref == reg.pair(j, i)
    assert reg.pair(idx[0], train[3]) == early
    dtt, _ = reg.distances(train, train)
    np.testing.assert_array_equal(dtt, dtt.T)
    assert np.all(np.diag(dtt) == 0.0)
    with pytest.raises(IndexError):  # only registered expressions can be anchors
        reg.anchor([len(reg)])


@pytest.mark.parametrize("grammar_name", ["change", "abcd"])
def test_graph_path_lengths_equal_the_edge_list_computation_to_the_bit(grammar_name) -> None:
    """The graphs' path lengths, computed from their construction, equal the direct
    numpy computation from their edges to the bit, on 400 draws of a grammar with
    change operators (and of one with WN and PERC)."""
    from prolas.surrogates.ot import expression_graph

    rng = np.random.default_rng(17)
    grammar = Grammar.from_file(ROOT / "grammars" / f"{grammar_name}.toml")
    config = OTConfig()
    for expr in dict.fromkeys(str(grammar.sample(rng)) for _ in range(400)):
        g = expression_graph(expr, config)
        assert g.paths.tobytes() == _reference_path_lengths(g).tobytes(), expr


@pytest.mark.parametrize("grammar_name", ["change", "abcd"])
def test_ot_distance_in_parts_equals_the_one_program_over_all_nodes(grammar_name) -> None:
    """otmann_distance solves ip and op in closed form and merges equal nodes; it equals
    the module docstring's one balanced program over all support nodes and two sinks,
    solved by ot.emd, to 1e-12 (200 pairs of a grammar's draws, d and d_bar)."""
    import ot

    from prolas.surrogates.ot import expression_graph, otmann_distance

    rng = np.random.default_rng(23)
    grammar = Grammar.from_file(ROOT / "grammars" / f"{grammar_name}.toml")
    config = OTConfig()
    lm = config.label_matrix()
    for _ in range(200):
        g1 = expression_graph(grammar.sample(rng), config)
        g2 = expression_graph(grammar.sample(rng), config)
        (l1, m1, p1), (l2, m2, p2) = g1.support, g2.support
        n1, n2 = len(m1), len(m2)
        c = np.ones((n1 + 1, n2 + 1))
        c[n1, n2] = 0.0
        structure = np.abs(p1[:, None, :] - p2[None, :, :]).mean(-1)
        c[:n1, :n2] = lm[np.ix_(l1, l2)] + config.nu_str * structure
        a, b = np.append(m1, g2.total_mass), np.append(m2, g1.total_mass)
        d = float((ot.emd(a, b, c) * c).sum())
        got = otmann_distance(g1, g2, config, lm)
        assert got[0] == pytest.approx(d, rel=1e-12, abs=1e-12)
        assert got[1] == pytest.approx(d / (g1.total_mass + g2.total_mass), rel=1e-12, abs=1e-12)
