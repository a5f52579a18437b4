//! The torn-read experiment at test size: under `random` read order, bookend
//! versioning returns torn values for tuples of three lines and more (at two
//! lines its head and tail cover every line, so it cannot), and every correct
//! scheme returns none.

use kvstore::SchemeSpec;
use sync_bench::torn::{TornConfig, run_cell};
use verbs::mem::{LineGap, ReadOrder};

fn config(reads: u64) -> TornConfig {
    TornConfig {
        reads,
        slots: 2,
        order: ReadOrder::Random,
        gap: LineGap::Spin(32),
        ..TornConfig::default()
    }
}

#[test]
fn bookend_tears_and_correct_schemes_do_not() {
    let bookend = SchemeSpec::Bookend(kvstore::UnsafeDemo::acknowledge_torn_reads());
    let cfg = config(50_000);
    for block in [256, 1024] {
        let c = run_cell(&cfg, &bookend, block).unwrap();
        println!("{c:?}");
        assert!(c.lines >= 3);
        assert!(
            c.torn > 0,
            "bookend at {block} B returned no torn value: {c:?}"
        );
    }
    let two_lines = run_cell(&config(20_000), &bookend, 128).unwrap();
    assert_eq!(two_lines.lines, 2);
    assert_eq!(two_lines.torn, 0, "{two_lines:?}");

    let cfg = config(25_000);
    for spec in SchemeSpec::catalog(false) {
        let mut reads = 0;
        for block in [256, 1024] {
            let c = run_cell(&cfg, &spec, block).unwrap();
            println!("{c:?}");
            assert_eq!(c.torn, 0, "{spec} returned a torn value: {c:?}");
            assert!(c.writes > 0);
            reads += c.reads;
        }
        assert!(reads >= 50_000);
    }
}
