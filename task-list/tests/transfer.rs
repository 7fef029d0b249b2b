//! `export` / `import` move a list between the file store and PostgreSQL without loss.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Fixture, add_blocked_by, create, id};
use serde_json::json;
use task_list::{ClaimOptions, Error, UpdateRequest, UpdateStatus};

/// A list with every kind of state: edges, an owner, metadata, a status, a deleted id (so the
/// high-water mark is above the highest task) and an audit history by two actors.
fn populated(fx: &Fixture) -> task_list::TaskList {
    let list = fx.open().with_actor(task_list::Actor::new("ann"));
    for s in ["schema", "api", "docs", "gone"] {
        create(&list, s);
    }
    assert!(add_blocked_by(&list, 2, &[1]).success);
    assert!(add_blocked_by(&list, 3, &[1, 2]).success);
    let mut meta = UpdateRequest::new(2);
    meta.metadata = Some(
        json!({"priority": 1, "tags": ["x"]})
            .as_object()
            .unwrap()
            .clone(),
    );
    meta.status = Some(UpdateStatus::InProgress);
    assert!(list.update(&meta).unwrap().success);
    let bob = list.clone().with_actor(task_list::Actor::new("bob"));
    assert!(
        bob.claim(id(1), "bob", ClaimOptions::default())
            .unwrap()
            .success
    );
    let mut delete = UpdateRequest::new(4);
    delete.status = Some(UpdateStatus::Deleted);
    assert!(list.update(&delete).unwrap().success);
    list
}

/// Files → PostgreSQL → files: every export along the way is the same document.
#[test]
fn export_import_round_trip_between_files_and_postgres_is_lossless() {
    let Some(pg) = Fixture::postgres() else {
        return;
    };
    let files = Fixture::files();
    let source = populated(&files);
    let exported = source.export().unwrap();
    assert_eq!(exported.tasks.len(), 3);
    assert_eq!(exported.high_water_mark, 4);

    let in_pg = pg.open();
    assert_eq!(in_pg.import(&exported).unwrap(), 3);
    assert_eq!(in_pg.export().unwrap(), exported);
    assert_eq!(in_pg.list().unwrap(), source.list().unwrap());
    assert_eq!(in_pg.ready().unwrap(), source.ready().unwrap());
    assert!(in_pg.doctor(false).unwrap().is_clean());

    let back = Fixture::files();
    let back_list = back.open();
    back_list.import(&in_pg.export().unwrap()).unwrap();
    assert_eq!(back_list.export().unwrap(), exported);
    // The task files are byte-for-byte the originals.
    for n in 1..=3 {
        let name = format!("list/{n}.json");
        let read = |fx: &Fixture| std::fs::read(format!("{}/{name}", fx.location())).unwrap();
        assert_eq!(read(&back), read(&files), "{name}");
    }
    // Ids continue after the high-water mark on both.
    assert_eq!(create(&in_pg, "next"), id(5));
    assert_eq!(create(&back_list, "next"), id(5));
}

#[test]
fn import_into_a_used_list_is_refused_and_writes_nothing() {
    let source = populated(&Fixture::files()).export().unwrap();
    for fx in [Some(Fixture::files()), Fixture::postgres()]
        .into_iter()
        .flatten()
    {
        let target = fx.open();
        create(&target, "already here");
        let err = target.import(&source).unwrap_err();
        assert!(
            matches!(
                err,
                Error::ImportTargetNotEmpty {
                    tasks: 1,
                    records: 1,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(target.snapshot().unwrap().tasks.len(), 1);
        assert_eq!(target.audit_log().unwrap().0.len(), 1);
        let mut wrong = source.clone();
        wrong.format = "something else".into();
        assert!(matches!(
            fx.open_with("fresh", common::fast_config()).import(&wrong),
            Err(Error::InvalidExport(_))
        ));
    }
}

#[test]
fn unknown_store_schemes_are_a_clear_error() {
    for url in ["mysql://h/db", "sqlite:///tmp/x", "/some/dir", "http://h"] {
        let err = task_list::TaskList::connect(url, "l", common::fast_config()).unwrap_err();
        assert!(matches!(err, Error::InvalidStore { .. }), "{url}: {err}");
        assert!(
            err.to_string()
                .contains("expected a postgres:// or postgresql:// URL"),
            "{err}"
        );
    }
    let err = task_list::TaskList::connect("postgres://h:notaport/db", "l", common::fast_config())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidStore { .. }), "{err}");
}

#[test]
fn an_unreachable_server_is_a_clear_error_after_bounded_retries() {
    // Nothing listens on port 1 of 127.0.0.1.
    let config = task_list::StoreConfig {
        pg: task_list::PgConfig {
            retries: 2,
            min_backoff: std::time::Duration::from_millis(1),
            ..task_list::PgConfig::default()
        },
        ..common::fast_config()
    };
    let err = task_list::TaskList::connect("postgres://u:secret@127.0.0.1:1/db", "l", config)
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, Error::Database { op: "connect", .. }),
        "{text}"
    );
    assert!(text.contains("postgres://u:***@127.0.0.1:1/db"), "{text}");
    assert!(!text.contains("secret"), "{text}");
}
