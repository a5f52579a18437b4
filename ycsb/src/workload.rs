//! YCSB's `CoreWorkload`: the properties, key choice, values, the operations and their
//! measurement (YCSB's `DBWrapper`: latency under `OP` or `OP-FAILED`, status under `OP`).

use crate::db::{Db, Record, Status};
use crate::generator::*;
use crate::measure::Recorder;
use crate::props::{PropError, Properties};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::time::Instant;

/// YCSB's standard workload files, built into the binary (`workloads/workloada` … `workloadf`).
pub const BUILTIN_WORKLOADS: [(&str, &str); 6] = [
    ("workloada", include_str!("../workloads/workloada")),
    ("workloadb", include_str!("../workloads/workloadb")),
    ("workloadc", include_str!("../workloads/workloadc")),
    ("workloadd", include_str!("../workloads/workloadd")),
    ("workloade", include_str!("../workloads/workloade")),
    ("workloadf", include_str!("../workloads/workloadf")),
];

/// The built-in workload file called `name` (`workloada`, or just `a`).
pub fn builtin_workload(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    let full = if name.len() == 1 {
        format!("workload{name}")
    } else {
        name
    };
    BUILTIN_WORKLOADS
        .iter()
        .find(|(n, _)| *n == full)
        .map(|(_, text)| *text)
}

/// A transaction type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

#[derive(Debug, Clone)]
enum KeyChooser {
    Uniform(UniformLongGenerator),
    Sequential(SequentialGenerator),
    Zipfian(ScrambledZipfianGenerator),
    Latest(SkewedLatestGenerator),
    Hotspot(HotspotIntegerGenerator),
    Exponential(ExponentialGenerator),
}

/// The generators one operation loop owns (cloned from the workload's prototype; shared counters
/// stay shared).
#[derive(Debug, Clone)]
struct LoopGenerators {
    fieldlength: IntGenerator,
    keychooser: KeyChooser,
    fieldchooser: UniformLongGenerator,
    scanlength: IntGenerator,
    opchooser: DiscreteGenerator<Op>,
}

/// One operation loop's state.
pub struct LoopState {
    gens: LoopGenerators,
    rng: SmallRng,
}

/// The core workload, shared by every loop of a run.
pub struct CoreWorkload {
    pub table: String,
    field_names: Vec<String>,
    readallfields: bool,
    readallfieldsbyname: bool,
    writeallfields: bool,
    pub dataintegrity: bool,
    ordered_inserts: bool,
    zeropadding: usize,
    pub recordcount: i64,
    pub scanproportion: f64,
    insertion_retry_limit: u64,
    insertion_retry_interval: f64,
    keysequence: CounterGenerator,
    transaction_insert_keysequence: AcknowledgedCounterGenerator,
    proto: LoopGenerators,
    seed: Option<u64>,
}

fn proportion(p: &Properties, key: &str, default: f64) -> Result<f64, PropError> {
    let v = p.get_f64(key, default)?;
    if !(0.0..=1.0).contains(&v) || v.is_nan() {
        return Err(p.invalid(key, "a proportion must be between 0 and 1"));
    }
    Ok(v)
}

impl CoreWorkload {
    /// Build from properties with YCSB's names and defaults.
    pub fn new(p: &Properties) -> Result<Self, PropError> {
        let table = p.get_or("table", "usertable").to_string();
        let fieldcount = p.get_i64("fieldcount", 10)?;
        if fieldcount < 1 {
            return Err(p.invalid("fieldcount", "must be at least 1"));
        }
        let prefix = p.get_or("fieldnameprefix", "field");
        let field_names = (0..fieldcount).map(|i| format!("{prefix}{i}")).collect();
        let fieldlength = p.get_i64("fieldlength", 100)?;
        let minfieldlength = p.get_i64("minfieldlength", 1)?;
        if fieldlength < 1 || minfieldlength < 1 || minfieldlength > fieldlength {
            return Err(p.invalid("fieldlength", "need 1 <= minfieldlength <= fieldlength"));
        }
        let fld = p.get_or("fieldlengthdistribution", "constant");
        let fieldlength_gen = match fld {
            "constant" => IntGenerator::Constant(fieldlength),
            "uniform" => {
                IntGenerator::Uniform(UniformLongGenerator::new(minfieldlength, fieldlength))
            }
            "zipfian" => IntGenerator::Zipfian(ZipfianGenerator::new(
                minfieldlength,
                fieldlength,
                ZIPFIAN_CONSTANT,
            )),
            _ => {
                return Err(p.invalid(
                    "fieldlengthdistribution",
                    "expected constant, uniform or zipfian",
                ));
            }
        };
        let dataintegrity = p.get_bool("dataintegrity", false);
        if dataintegrity && fld != "constant" {
            return Err(p.invalid(
                "fieldlengthdistribution",
                "dataintegrity=true requires fieldlengthdistribution=constant",
            ));
        }

        let mut recordcount = p.get_i64("recordcount", 0)?;
        if recordcount == 0 {
            recordcount = i32::MAX as i64;
        }
        let insertstart = p.get_i64("insertstart", 0)?;
        let insertcount = p.get_i64("insertcount", recordcount - insertstart)?;
        if recordcount < insertstart + insertcount {
            return Err(p.invalid(
                "insertcount",
                "recordcount must be at least insertstart + insertcount",
            ));
        }
        let ordered_inserts = match p.get_or("insertorder", "hashed") {
            "hashed" => false,
            "ordered" => true,
            _ => return Err(p.invalid("insertorder", "expected hashed or ordered")),
        };
        let zeropadding = p.get_i64("zeropadding", 1)?.max(0) as usize;

        let readproportion = proportion(p, "readproportion", 0.95)?;
        let updateproportion = proportion(p, "updateproportion", 0.05)?;
        let insertproportion = proportion(p, "insertproportion", 0.0)?;
        let scanproportion = proportion(p, "scanproportion", 0.0)?;
        let rmwproportion = proportion(p, "readmodifywriteproportion", 0.0)?;
        let mut opchooser = DiscreteGenerator::default();
        for (op, w) in [
            (Op::Read, readproportion),
            (Op::Update, updateproportion),
            (Op::Insert, insertproportion),
            (Op::Scan, scanproportion),
            (Op::ReadModifyWrite, rmwproportion),
        ] {
            if w > 0.0 {
                opchooser.add(op, w);
            }
        }

        let zipfian_constant = p.get_f64("zipfianconstant", ZIPFIAN_CONSTANT)?;
        if !(zipfian_constant > 0.0 && zipfian_constant.is_finite()) {
            return Err(p.invalid(
                "zipfianconstant",
                "needs a constant > 0 (below 1: YCSB's generator; 1 or more: exact zipf by \
                 rejection-inversion)",
            ));
        }
        let operationcount = p.get_i64("operationcount", 0)?;
        let transaction_insert_keysequence = AcknowledgedCounterGenerator::new(recordcount);
        let keychooser = match p.get_or("requestdistribution", "uniform") {
            "uniform" => KeyChooser::Uniform(UniformLongGenerator::new(
                insertstart,
                insertstart + insertcount - 1,
            )),
            "exponential" => {
                let percentile = p.get_f64("exponential.percentile", 95.0)?;
                let frac = p.get_f64("exponential.frac", 0.8571428571)?;
                KeyChooser::Exponential(ExponentialGenerator::new(
                    percentile,
                    recordcount as f64 * frac,
                ))
            }
            "sequential" => KeyChooser::Sequential(SequentialGenerator::new(
                insertstart,
                insertstart + insertcount - 1,
            )),
            "zipfian" => {
                // Keys inserted during the run are part of the item space, as in YCSB.
                let expectednewkeys =
                    (operationcount as f64 * insertproportion * 2.0) as i32 as i64;
                KeyChooser::Zipfian(ScrambledZipfianGenerator::new(
                    insertstart,
                    insertstart + insertcount + expectednewkeys,
                    zipfian_constant,
                ))
            }
            "latest" => KeyChooser::Latest(SkewedLatestGenerator::new(
                transaction_insert_keysequence.last_value(),
            )),
            "hotspot" => {
                let hotsetfraction = p.get_f64("hotspotdatafraction", 0.2)?;
                let hotopnfraction = p.get_f64("hotspotopnfraction", 0.8)?;
                KeyChooser::Hotspot(HotspotIntegerGenerator::new(
                    insertstart,
                    insertstart + insertcount - 1,
                    hotsetfraction,
                    hotopnfraction,
                ))
            }
            _ => {
                return Err(p.invalid(
                    "requestdistribution",
                    "expected uniform, zipfian, latest, hotspot, exponential or sequential",
                ));
            }
        };
        let minscanlength = p.get_i64("minscanlength", 1)?;
        let maxscanlength = p.get_i64("maxscanlength", 1000)?;
        if minscanlength < 1 || maxscanlength < minscanlength {
            return Err(p.invalid("maxscanlength", "need 1 <= minscanlength <= maxscanlength"));
        }
        let scanlength = match p.get_or("scanlengthdistribution", "uniform") {
            "uniform" => {
                IntGenerator::Uniform(UniformLongGenerator::new(minscanlength, maxscanlength))
            }
            "zipfian" => IntGenerator::Zipfian(ZipfianGenerator::new(
                minscanlength,
                maxscanlength,
                ZIPFIAN_CONSTANT,
            )),
            _ => {
                return Err(p.invalid("scanlengthdistribution", "expected uniform or zipfian"));
            }
        };
        let seed = match p.get("seed") {
            Some(_) => Some(p.get_u64("seed", 0)?),
            None => None,
        };
        Ok(CoreWorkload {
            table,
            field_names,
            readallfields: p.get_bool("readallfields", true),
            readallfieldsbyname: p.get_bool("readallfieldsbyname", false),
            writeallfields: p.get_bool("writeallfields", false),
            dataintegrity,
            ordered_inserts,
            zeropadding,
            recordcount,
            scanproportion: if opchooser.is_empty() {
                0.0
            } else {
                scanproportion
            },
            insertion_retry_limit: p.get_u64("core_workload_insertion_retry_limit", 0)?,
            insertion_retry_interval: p.get_f64("core_workload_insertion_retry_interval", 3.0)?,
            keysequence: CounterGenerator::new(insertstart),
            transaction_insert_keysequence,
            proto: LoopGenerators {
                fieldlength: fieldlength_gen,
                keychooser,
                fieldchooser: UniformLongGenerator::new(0, fieldcount - 1),
                scanlength,
                opchooser,
            },
            seed,
        })
        .and_then(|w| {
            if w.proto.opchooser.is_empty() {
                Err(p.invalid(
                    "readproportion",
                    "all operation proportions are 0: nothing to run",
                ))
            } else {
                Ok(w)
            }
        })
    }

    /// The state of operation loop `index` (seeded from `seed` + index when `-p seed` is set).
    pub fn loop_state(&self, index: u64) -> LoopState {
        let rng = match self.seed {
            Some(s) => SmallRng::seed_from_u64(s.wrapping_add(index.wrapping_mul(0x9E37_79B9))),
            None => SmallRng::from_rng(&mut rand::rng()),
        };
        LoopState {
            gens: self.proto.clone(),
            rng,
        }
    }

    pub fn build_key_name(&self, keynum: i64) -> String {
        build_key_name(keynum, self.ordered_inserts, self.zeropadding)
    }

    pub fn field_names(&self) -> &[String] {
        &self.field_names
    }

    fn field_value(&self, st: &mut LoopState, key: &str, field: &str) -> Vec<u8> {
        let len = st.gens.fieldlength.next_value(&mut st.rng).max(0) as usize;
        if self.dataintegrity {
            deterministic_value(key, field, len).into_bytes()
        } else {
            let mut v = Vec::with_capacity(len);
            while v.len() < len {
                let mut r = rand::RngCore::next_u64(&mut st.rng);
                for _ in 0..8 {
                    if v.len() == len {
                        break;
                    }
                    v.push(b' ' + (r % 95) as u8);
                    r /= 95;
                }
            }
            v
        }
    }

    /// YCSB's `buildValues`: every field.
    pub fn build_values(&self, st: &mut LoopState, key: &str) -> Record {
        self.field_names
            .iter()
            .map(|f| (f.clone(), self.field_value(st, key, f)))
            .collect()
    }

    fn build_single_value(&self, st: &mut LoopState, key: &str) -> Record {
        let i = st.gens.fieldchooser.next_value(&mut st.rng) as usize;
        let f = &self.field_names[i.min(self.field_names.len() - 1)];
        vec![(f.clone(), self.field_value(st, key, f))]
    }

    fn next_keynum(&self, st: &mut LoopState) -> i64 {
        let rng = &mut st.rng;
        let last = || self.transaction_insert_keysequence.last_value();
        loop {
            let v = match &mut st.gens.keychooser {
                KeyChooser::Exponential(g) => {
                    let k = last() - g.next_value(rng) as i32 as i64;
                    if k < 0 {
                        continue;
                    }
                    return k;
                }
                KeyChooser::Uniform(g) => g.next_value(rng),
                KeyChooser::Sequential(g) => g.next_value(),
                KeyChooser::Zipfian(g) => g.next_value(rng),
                KeyChooser::Latest(g) => g.next_value(rng, last()),
                KeyChooser::Hotspot(g) => g.next_value(rng),
            } as i32 as i64;
            if v <= last() {
                return v;
            }
        }
    }

    fn read_fields(&self, st: &mut LoopState) -> Option<Vec<String>> {
        if !self.readallfields {
            let i = st.gens.fieldchooser.next_value(&mut st.rng) as usize;
            Some(vec![
                self.field_names[i.min(self.field_names.len() - 1)].clone(),
            ])
        } else if self.readallfieldsbyname {
            Some(self.field_names.clone())
        } else {
            None
        }
    }

    /// One load-phase insert (YCSB's `doInsert`, with its retries). False stops the loop.
    pub async fn do_insert(&self, db: &dyn Db, rec: &Recorder, st: &mut LoopState) -> bool {
        let keynum = self.keysequence.next_value() as i32 as i64;
        let key = self.build_key_name(keynum);
        let values = self.build_values(st, &key);
        let mut retries = 0;
        loop {
            let status = measured(rec, "INSERT", db.insert(&self.table, &key, &values)).await;
            if status.is_ok() {
                return true;
            }
            retries += 1;
            if retries <= self.insertion_retry_limit {
                eprintln!("Retrying insertion, retry count: {retries}");
                let jitter = 0.8 + 0.4 * next_f64(&mut st.rng);
                let pause =
                    std::time::Duration::from_secs_f64(self.insertion_retry_interval * jitter);
                crate::executor::sleep_until(Instant::now() + pause).await;
            } else {
                eprintln!(
                    "Error inserting, not retrying any more. number of attempts: {retries}Insertion Retry Limit: {}",
                    self.insertion_retry_limit
                );
                return false;
            }
        }
    }

    /// One run-phase transaction (YCSB's `doTransaction`).
    pub async fn do_transaction(&self, db: &dyn Db, rec: &Recorder, st: &mut LoopState) -> bool {
        let op = st.gens.opchooser.next_value(&mut st.rng);
        match op {
            Op::Read => self.do_read(db, rec, st).await,
            Op::Update => self.do_update(db, rec, st).await,
            Op::Insert => self.do_tx_insert(db, rec, st).await,
            Op::Scan => self.do_scan(db, rec, st).await,
            Op::ReadModifyWrite => self.do_rmw(db, rec, st).await,
        }
        true
    }

    async fn do_read(&self, db: &dyn Db, rec: &Recorder, st: &mut LoopState) {
        let key = self.build_key_name(self.next_keynum(st));
        let fields = self.read_fields(st);
        let (_, cells) =
            measured_read(rec, "READ", db.read(&self.table, &key, fields.as_deref())).await;
        if self.dataintegrity {
            self.verify_row(rec, &key, &cells);
        }
    }

    async fn do_update(&self, db: &dyn Db, rec: &Recorder, st: &mut LoopState) {
        let key = self.build_key_name(self.next_keynum(st));
        let values = if self.writeallfields {
            self.build_values(st, &key)
        } else {
            self.build_single_value(st, &key)
        };
        measured(rec, "UPDATE", db.update(&self.table, &key, &values)).await;
    }

    async fn do_tx_insert(&self, db: &dyn Db, rec: &Recorder, st: &mut LoopState) {
        let keynum = self.transaction_insert_keysequence.next_value();
        let key = self.build_key_name(keynum);
        let values = self.build_values(st, &key);
        measured(rec, "INSERT", db.insert(&self.table, &key, &values)).await;
        self.transaction_insert_keysequence.acknowledge(keynum);
    }

    async fn do_scan(&self, db: &dyn Db, rec: &Recorder, st: &mut LoopState) {
        let key = self.build_key_name(self.next_keynum(st));
        let len = st.gens.scanlength.next_value(&mut st.rng).max(0) as usize;
        let fields = self.read_fields(st);
        let start = Instant::now();
        let (status, _) = db.scan(&self.table, &key, len, fields.as_deref()).await;
        record(rec, "SCAN", status, start);
    }

    async fn do_rmw(&self, db: &dyn Db, rec: &Recorder, st: &mut LoopState) {
        let key = self.build_key_name(self.next_keynum(st));
        let fields = self.read_fields(st);
        let values = if self.writeallfields {
            self.build_values(st, &key)
        } else {
            self.build_single_value(st, &key)
        };
        let start = Instant::now();
        let (_, cells) =
            measured_read(rec, "READ", db.read(&self.table, &key, fields.as_deref())).await;
        measured(rec, "UPDATE", db.update(&self.table, &key, &values)).await;
        let micros = start.elapsed().as_micros() as u64;
        if self.dataintegrity {
            self.verify_row(rec, &key, &cells);
        }
        rec.measure("READ-MODIFY-WRITE", micros);
    }

    /// YCSB's `verifyRow`: every returned field must equal its deterministic value; no data is
    /// an error. Measured as `VERIFY`.
    pub fn verify_row(&self, rec: &Recorder, key: &str, cells: &Record) {
        let start = Instant::now();
        let status = if cells.is_empty() {
            Status::Error
        } else if cells
            .iter()
            .all(|(f, v)| *v == deterministic_value(key, f, self.expected_len()).into_bytes())
        {
            Status::Ok
        } else {
            Status::UnexpectedState
        };
        rec.measure("VERIFY", start.elapsed().as_micros() as u64);
        rec.report_status("VERIFY", status);
    }

    fn expected_len(&self) -> usize {
        match self.proto.fieldlength {
            IntGenerator::Constant(c) => c.max(0) as usize,
            _ => 0,
        }
    }
}

fn record(rec: &Recorder, op: &str, status: Status, start: Instant) {
    let micros = start.elapsed().as_micros() as u64;
    if status.is_ok() {
        rec.measure(op, micros);
    } else {
        rec.measure(&format!("{op}-FAILED"), micros);
    }
    rec.report_status(op, status);
}

async fn measured(
    rec: &Recorder,
    op: &str,
    fut: impl std::future::Future<Output = Status>,
) -> Status {
    let start = Instant::now();
    let status = fut.await;
    record(rec, op, status, start);
    status
}

async fn measured_read(
    rec: &Recorder,
    op: &str,
    fut: impl std::future::Future<Output = (Status, Record)>,
) -> (Status, Record) {
    let start = Instant::now();
    let (status, cells) = fut.await;
    record(rec, op, status, start);
    (status, cells)
}
