//! Placement against rings small enough to work out by hand (the expected replicas in each table
//! were computed on paper from the rules in the module documentation, not by running the code).

use super::*;

/// `(endpoint, dc, rack, token)` of a node with one token.
type HandNode = (&'static str, &'static str, &'static str, i64);
/// `(end token, replicas in order)` of every range, in ring order.
type Expected = &'static [(i64, &'static [&'static str])];

/// A cluster of hand-placed nodes `(endpoint, dc, rack, token)`.
fn ring_of(nodes: &[(&str, &str, &str, i64)]) -> Cluster {
    let cluster = Cluster::new(1, 1);
    for (endpoint, dc, rack, token) in nodes {
        cluster.join_with_tokens(endpoint, dc, rack, &[*token]).unwrap();
    }
    cluster
}

/// `(end token, replicas)` of every range in ring order.
fn placement(cluster: &Cluster, strategy: Strategy) -> Vec<(i64, Vec<String>)> {
    cluster.create_keyspace("ks", strategy);
    cluster.describe_ring("ks", "A").unwrap().into_iter().map(|r| (r.end, r.endpoints)).collect()
}

fn expect(rows: &[(i64, &[&str])]) -> Vec<(i64, Vec<String>)> {
    rows.iter().map(|(end, eps)| (*end, eps.iter().map(|e| (*e).to_owned()).collect())).collect()
}

const FOUR_NODES: &[HandNode] =
    &[("A", "dc1", "r1", 10), ("B", "dc1", "r1", 20), ("C", "dc1", "r1", 30), ("D", "dc1", "r1", 40)];

#[test]
fn simple_strategy_takes_the_next_distinct_nodes_clockwise() {
    let cases: &[(usize, Expected)] = &[
        (1, &[(10, &["A"]), (20, &["B"]), (30, &["C"]), (40, &["D"])]),
        (2, &[(10, &["A", "B"]), (20, &["B", "C"]), (30, &["C", "D"]), (40, &["D", "A"])]),
        (
            3,
            &[(10, &["A", "B", "C"]), (20, &["B", "C", "D"]), (30, &["C", "D", "A"]), (40, &["D", "A", "B"])],
        ),
        // More replicas than nodes: every node, once.
        (
            5,
            &[
                (10, &["A", "B", "C", "D"]),
                (20, &["B", "C", "D", "A"]),
                (30, &["C", "D", "A", "B"]),
                (40, &["D", "A", "B", "C"]),
            ],
        ),
    ];
    for (rf, expected) in cases {
        let cluster = ring_of(FOUR_NODES);
        assert_eq!(
            placement(&cluster, Strategy::Simple { rf: *rf }),
            expect(expected),
            "SimpleStrategy RF {rf}"
        );
    }
}

#[test]
fn simple_strategy_skips_a_node_met_twice_on_its_vnodes() {
    let cluster = Cluster::new(1, 2);
    cluster.join_with_tokens("A", "dc1", "r1", &[10, 30]).unwrap();
    cluster.join_with_tokens("B", "dc1", "r1", &[20]).unwrap();
    cluster.join_with_tokens("C", "dc1", "r1", &[40]).unwrap();
    assert_eq!(
        placement(&cluster, Strategy::Simple { rf: 2 }),
        expect(&[(10, &["A", "B"]), (20, &["B", "A"]), (30, &["A", "C"]), (40, &["C", "A"])])
    );
}

/// dc1: A, B in r1, D in r2, F in r3. dc2: C, G in r1, E in r2.
const TWO_DCS: &[HandNode] = &[
    ("A", "dc1", "r1", 10),
    ("B", "dc1", "r1", 20),
    ("C", "dc2", "r1", 30),
    ("D", "dc1", "r2", 40),
    ("E", "dc2", "r2", 50),
    ("F", "dc1", "r3", 60),
    ("G", "dc2", "r1", 70),
];

#[test]
fn network_topology_strategy_places_per_datacenter_in_distinct_racks() {
    let cases: &[(&[(&str, usize)], Expected)] = &[
        (
            &[("dc1", 3), ("dc2", 2)],
            &[
                (10, &["A", "C", "D", "E", "F"]),
                (20, &["B", "C", "D", "E", "F"]),
                (30, &["C", "D", "E", "F", "A"]),
                (40, &["D", "E", "F", "G", "A"]),
                (50, &["E", "F", "G", "A", "D"]),
                (60, &["F", "G", "A", "D", "E"]),
                (70, &["G", "A", "D", "E", "F"]),
            ],
        ),
        // One DC only: dc2's nodes replicate nothing.
        (
            &[("dc1", 2)],
            &[
                (10, &["A", "D"]),
                (20, &["B", "D"]),
                (30, &["D", "F"]),
                (40, &["D", "F"]),
                (50, &["F", "A"]),
                (60, &["F", "A"]),
                (70, &["A", "D"]),
            ],
        ),
        // A datacenter named but without nodes is skipped; a factor of 0 too.
        (
            &[("dc2", 1), ("dc9", 3), ("dc1", 0)],
            &[
                (10, &["C"]),
                (20, &["C"]),
                (30, &["C"]),
                (40, &["E"]),
                (50, &["E"]),
                (60, &["G"]),
                (70, &["G"]),
            ],
        ),
    ];
    for (dcs, expected) in cases {
        let cluster = ring_of(TWO_DCS);
        assert_eq!(
            placement(&cluster, Strategy::nts(dcs)),
            expect(expected),
            "NetworkTopologyStrategy {dcs:?}"
        );
    }
}

#[test]
fn network_topology_strategy_repeats_racks_only_as_often_as_the_factor_exceeds_them() {
    // Scylla's own example: RF 3, two racks; P3 (a third node of r1) is refused, P4 (r2) taken.
    let four: &[HandNode] =
        &[("P1", "dc1", "r1", 10), ("P2", "dc1", "r1", 20), ("P3", "dc1", "r1", 30), ("P4", "dc1", "r2", 40)];
    // A rack (r2) with fewer nodes than the factor.
    let uneven: &[HandNode] =
        &[("A", "dc1", "r1", 10), ("B", "dc1", "r1", 20), ("D", "dc1", "r2", 30), ("X", "dc1", "r1", 40)];
    // More replicas asked than the DC has nodes: each node once.
    let small: &[HandNode] = &[("A", "dc1", "r1", 10), ("B", "dc1", "r1", 20)];
    let cases: &[(&[HandNode], usize, Expected)] = &[
        (
            four,
            3,
            &[
                (10, &["P1", "P2", "P4"]),
                (20, &["P2", "P3", "P4"]),
                (30, &["P3", "P4", "P1"]),
                (40, &["P4", "P1", "P2"]),
            ],
        ),
        (
            uneven,
            3,
            &[(10, &["A", "B", "D"]), (20, &["B", "D", "X"]), (30, &["D", "X", "A"]), (40, &["X", "A", "D"])],
        ),
        (uneven, 2, &[(10, &["A", "D"]), (20, &["B", "D"]), (30, &["D", "X"]), (40, &["X", "D"])]),
        (small, 3, &[(10, &["A", "B"]), (20, &["B", "A"])]),
    ];
    for (nodes, rf, expected) in cases {
        let cluster = ring_of(nodes);
        assert_eq!(
            placement(&cluster, Strategy::nts(&[("dc1", *rf)])),
            expect(expected),
            "RF {rf} on {nodes:?}"
        );
    }
}

#[test]
fn describe_ring_answers_in_the_reference_shape_with_the_wrapping_range() {
    let cluster = ring_of(&[("10.0.0.1", "dc1", "r1", -5), ("10.0.0.2", "dc1", "r2", 7)]);
    cluster.create_keyspace("ks", Strategy::nts(&[("dc1", 1)]));
    let rows = cluster.describe_ring_json("ks", "10.0.0.1").unwrap();
    let mut rows = rows.as_array().unwrap().clone();
    rows.sort_by_key(|r| r["end_token"].as_str().unwrap().parse::<i64>().unwrap());
    assert_eq!(
        rows,
        vec![
            json!({
                "start_token": "7", "end_token": "-5",
                "endpoints": ["10.0.0.1"], "rpc_endpoints": ["10.0.0.1"],
                "endpoint_details": [{"host": "10.0.0.1", "datacenter": "dc1", "rack": "r1"}],
            }),
            json!({
                "start_token": "-5", "end_token": "7",
                "endpoints": ["10.0.0.2"], "rpc_endpoints": ["10.0.0.2"],
                "endpoint_details": [{"host": "10.0.0.2", "datacenter": "dc1", "rack": "r2"}],
            }),
        ]
    );
}

#[test]
fn local_and_tablet_keyspaces_and_unknown_ones() {
    let cluster = ring_of(FOUR_NODES);
    let local = cluster.describe_ring("system", "C").unwrap();
    assert!(local.iter().all(|r| r.endpoints == ["C"]), "{local:?}");
    cluster.create_keyspace("t", Strategy::tablets(&[("dc1", 3)]));
    assert_eq!(
        cluster.describe_ring("t", "A").unwrap_err().to_string(),
        "Tried to obtain per-keyspace effective replication map of t but it's per-table"
    );
    assert_eq!(cluster.describe_ring("nope", "A").unwrap_err().to_string(), "Keyspace nope Does not exist");
}

#[test]
fn seeded_tokens_are_repeatable_and_a_bootstrapping_node_is_not_in_the_ring() {
    let build = |seed| {
        let cluster = Cluster::new(seed, 16);
        cluster.join("10.0.0.1", "dc1", "r1").unwrap();
        cluster.join("10.0.0.2", "dc1", "r1").unwrap();
        cluster
    };
    assert_eq!(build(7).ring(), build(7).ring());
    assert_ne!(build(7).ring(), build(8).ring());
    let cluster = build(7);
    assert_eq!(cluster.ring().len(), 32);
    let tokens = cluster.start_joining("10.0.0.3", "dc1", "r1").unwrap();
    assert_eq!(tokens.len(), 16);
    assert_eq!(cluster.ring().len(), 32);
    assert!(cluster.node_tokens("10.0.0.3").is_empty());
    cluster.finish_joining("10.0.0.3").unwrap();
    assert_eq!(cluster.node_tokens("10.0.0.3"), tokens);
    assert_eq!(cluster.ring().len(), 48);
}

#[test]
fn data_stays_on_a_node_until_it_is_cleaned() {
    let cluster = ring_of(&FOUR_NODES[..3]);
    cluster.create_keyspace("ks", Strategy::Simple { rf: 2 });
    let stale_in_ks = |cluster: &Cluster| -> BTreeSet<String> {
        let stale = cluster.stale().into_iter();
        stale.filter(|(_, ks)| ks == "ks").map(|(e, _)| e).collect()
    };
    assert!(stale_in_ks(&cluster).is_empty(), "created after the nodes joined");
    // The system keyspaces existed while the nodes joined one by one: the first ones hold data
    // of ranges the later ones took.
    assert_eq!(cluster.stale_ranges("A", "system_traces"), [(10, 20)]);

    // D joins at 40: (30, 40] was A's and B's, now D's and A's; (20, 30] was C's and A's, now
    // C's and D's. C lost nothing.
    cluster.join_with_tokens("D", "dc1", "r1", &[40]).unwrap();
    assert_eq!(cluster.stale_ranges("B", "ks"), [(30, 40)]);
    assert_eq!(cluster.stale_ranges("A", "ks"), [(20, 30)]);
    assert!(cluster.stale_ranges("C", "ks").is_empty());
    cluster.cleaned("B", "ks");
    assert!(cluster.stale_ranges("B", "ks").is_empty());

    // RF 2 → 1: every node keeps data for the ranges where it was the second replica.
    cluster.alter_keyspace("ks", Strategy::Simple { rf: 1 }).unwrap();
    assert_eq!(stale_in_ks(&cluster), ["A", "B", "C", "D"].map(String::from).into());

    // Scale-in only adds ranges to the nodes left.
    for endpoint in ["A", "B", "C", "D"] {
        cluster.cleaned(endpoint, "ks");
    }
    cluster.decommission("D").unwrap();
    assert!(stale_in_ks(&cluster).is_empty());
}
