//! The embedded schema migrations on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Barrier;

use common::{Fixture, create, fast_config};
use task_list::TaskList;

#[test]
fn clients_connecting_at_once_to_a_fresh_database_migrate_it_once() {
    let Some(fx) = Fixture::postgres() else {
        return;
    };
    let url = fx.location();
    let barrier = Barrier::new(8);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|n| {
                let (url, barrier) = (&url, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let list = TaskList::connect(url, &format!("l{}", n % 2), fast_config())?;
                    list.create(&task_list::CreateRequest::new("t", "d"))
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap().unwrap();
        }
    });
    let applied: Vec<(i32, i64)> = fx
        .sql("SELECT version, count(*) FROM task_list_migrations GROUP BY version ORDER BY 1")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(applied, vec![(1, 1)]);
    // Four creates on each of two lists: ids 1..=4 on each, none lost.
    for list in ["l0", "l1"] {
        let ids: Vec<u64> = fx
            .open_with(list, fast_config())
            .snapshot()
            .unwrap()
            .tasks
            .keys()
            .map(|id| id.get())
            .collect();
        assert_eq!(ids, vec![1, 2, 3, 4], "{list}");
    }
    // Connecting again to a current schema changes nothing.
    create(&fx.open(), "again");
    assert_eq!(fx.sql("SELECT * FROM task_list_migrations").len(), 1);
}
