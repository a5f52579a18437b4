//! Doorbells of many WRITEs, then of as many READs of the same blocks, on one queue
//! pair of a soft-RoCE transport (shared by the memnode and switch tests of
//! segmentation offload, which include this file): runs of equal-length datagrams in
//! both directions, with every byte checked.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use verbs::transport::udp::UdpTransport;
use verbs::transport::{QpHandle, Transport};
use verbs::wr::{CompletionValue, RemoteAddr, WorkRequest};

/// The bytes block `i` of `len` bytes is written with.
pub fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|b| (b * 31 + i * 7) as u8).collect()
}

/// Writes `runs` doorbells of `per_run` blocks of `len` bytes from `base`, reads every
/// block back the same way, and panics on a failed work request or a block that does
/// not read back as written.
pub fn write_then_read(
    transport: &mut UdpTransport,
    qp: QpHandle,
    base: RemoteAddr,
    runs: usize,
    per_run: usize,
    len: usize,
) {
    for phase in 0..2 {
        for run in 0..runs {
            let batch: Vec<(u64, WorkRequest)> = (0..per_run)
                .map(|k| {
                    let i = run * per_run + k;
                    let remote = base.offset((i * len) as u64);
                    let wr = if phase == 0 {
                        WorkRequest::Write {
                            remote,
                            data: pattern(i, len),
                            inline: false,
                        }
                    } else {
                        WorkRequest::Read {
                            remote,
                            len: len as u32,
                        }
                    };
                    (i as u64, wr)
                })
                .collect();
            transport.post(qp, batch).expect("post");
            let mut done = 0;
            let deadline = Instant::now() + Duration::from_secs(10);
            while done < per_run {
                assert!(Instant::now() < deadline, "{done} of {per_run} completed");
                let mut out = Vec::new();
                transport.poll(Instant::now(), &mut out);
                for (_, c) in out {
                    done += 1;
                    let i = c.wr_id as usize;
                    match c.result {
                        Ok(CompletionValue::Read(bytes)) => {
                            assert_eq!(bytes, pattern(i, len), "block {i}")
                        }
                        Ok(CompletionValue::Write) if phase == 0 => {}
                        other => panic!("work request {i} failed: {other:?}"),
                    }
                }
                transport.wait(Instant::now() + Duration::from_millis(1));
            }
        }
    }
}
