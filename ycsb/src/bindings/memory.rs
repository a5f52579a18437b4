//! `memory` (alias `basic`): an in-process store, a `BTreeMap` of records behind one mutex shared
//! by all threads. It plays the part of YCSB's `BasicDB` (a binding with no server, for testing
//! the driver end to end) but keeps the data, so reads, `dataintegrity=true` and ordered scans
//! work. Its futures are ready at once; the data lives as long as the process, so `load` and
//! `run` must share one process (`ycsb loadrun memory …`).

use crate::db::{Binding, Db, DbError, LocalBoxFuture, Record, Status};
use crate::props::Properties;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

type Table = BTreeMap<String, BTreeMap<String, Vec<u8>>>;

/// The shared store.
#[derive(Default, Clone)]
pub struct MemoryBinding {
    tables: Arc<Mutex<BTreeMap<String, Table>>>,
}

impl MemoryBinding {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records in `table`.
    pub fn len(&self, table: &str) -> usize {
        self.tables
            .lock()
            .unwrap()
            .get(table)
            .map_or(0, |t| t.len())
    }

    pub fn is_empty(&self, table: &str) -> bool {
        self.len(table) == 0
    }
}

impl Binding for MemoryBinding {
    fn name(&self) -> &str {
        "memory"
    }

    fn supports_scan(&self) -> bool {
        true
    }

    fn create(&self, _props: &Properties, _thread: usize) -> Result<Box<dyn Db>, DbError> {
        Ok(Box::new(MemoryDb {
            tables: self.tables.clone(),
        }))
    }
}

struct MemoryDb {
    tables: Arc<Mutex<BTreeMap<String, Table>>>,
}

fn project(rec: &BTreeMap<String, Vec<u8>>, fields: Option<&[String]>) -> Record {
    match fields {
        None => rec.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Some(fs) => fs
            .iter()
            .filter_map(|f| rec.get(f).map(|v| (f.clone(), v.clone())))
            .collect(),
    }
}

impl MemoryDb {
    fn with<T>(&self, table: &str, f: impl FnOnce(&mut Table) -> T) -> T {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        f(tables.entry(table.to_string()).or_default())
    }
}

impl Db for MemoryDb {
    fn read<'a>(
        &'a self,
        table: &'a str,
        key: &'a str,
        fields: Option<&'a [String]>,
    ) -> LocalBoxFuture<'a, (Status, Record)> {
        let r = self.with(table, |t| match t.get(key) {
            Some(rec) => (Status::Ok, project(rec, fields)),
            None => (Status::NotFound, Vec::new()),
        });
        Box::pin(std::future::ready(r))
    }

    fn scan<'a>(
        &'a self,
        table: &'a str,
        start_key: &'a str,
        count: usize,
        fields: Option<&'a [String]>,
    ) -> LocalBoxFuture<'a, (Status, Vec<(String, Record)>)> {
        let rows = self.with(table, |t| {
            t.range(start_key.to_string()..)
                .take(count)
                .map(|(k, rec)| (k.clone(), project(rec, fields)))
                .collect()
        });
        Box::pin(std::future::ready((Status::Ok, rows)))
    }

    fn update<'a>(
        &'a self,
        table: &'a str,
        key: &'a str,
        values: &'a Record,
    ) -> LocalBoxFuture<'a, Status> {
        let s = self.with(table, |t| match t.get_mut(key) {
            Some(rec) => {
                for (f, v) in values {
                    rec.insert(f.clone(), v.clone());
                }
                Status::Ok
            }
            None => Status::NotFound,
        });
        Box::pin(std::future::ready(s))
    }

    fn insert<'a>(
        &'a self,
        table: &'a str,
        key: &'a str,
        values: &'a Record,
    ) -> LocalBoxFuture<'a, Status> {
        self.with(table, |t| {
            t.insert(key.to_string(), values.iter().cloned().collect());
        });
        Box::pin(std::future::ready(Status::Ok))
    }

    fn delete<'a>(&'a self, table: &'a str, key: &'a str) -> LocalBoxFuture<'a, Status> {
        let s = self.with(table, |t| match t.remove(key) {
            Some(_) => Status::Ok,
            None => Status::NotFound,
        });
        Box::pin(std::future::ready(s))
    }
}
