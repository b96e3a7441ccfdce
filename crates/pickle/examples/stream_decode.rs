//! Times the decoder alone streaming a snapshot pickle from its file (what the snapshot
//! reader's hook does, without making rows): every dict appended to `device_traces[k]` is
//! consumed and its frame list tagged.
//!
//!     cargo run --release -p memq-pickle --example stream_decode -- FILE.pickle
//!
//! Prints seconds, MB/s, the entries taken and what the decoder held at most.

use std::time::Instant;

use memq_pickle::stream::{Abort, Hook, Slot, Take};
use memq_pickle::value::Value;

/// Consumes the entries of `root["device_traces"][k]`, tagging their `frames`.
struct Entries {
    taken: u64,
    next_tag: u32,
}

impl<'a> Hook<'a> for Entries {
    fn append(&mut self, take: &mut Take<'_, 'a>) -> Result<bool, Abort> {
        let arena = take.arena();
        let Some(&[(_, Slot::Index(_)), (_, Slot::Key(key))]) = take.place() else {
            return Ok(false);
        };
        if arena.str(key) != Some("device_traces") {
            return Ok(false);
        }
        for i in 0..take.items().len() {
            if !take.can_consume(i) {
                continue;
            }
            let item = take.items()[i];
            let frames = arena.dict(item).and_then(|fields| {
                fields
                    .iter()
                    .find(|(k, _)| arena.str(*k) == Some("frames"))
                    .map(|&(_, v)| v)
            });
            take.consume(i);
            if let Some(frames @ Value::Obj(_)) = frames {
                self.next_tag += 1;
                take.tag(frames, self.next_tag);
            }
            self.taken += 1;
        }
        Ok(true)
    }
}

fn main() {
    let path = std::env::args().nth(1).expect("FILE.pickle");
    let file = std::fs::File::open(&path).expect("open");
    let len = file.metadata().expect("metadata").len();
    let mut hook = Entries {
        taken: 0,
        next_tag: 0,
    };
    let t0 = Instant::now();
    let decoded = memq_pickle::decode_read(file, len, Some(&mut hook)).expect("decode");
    let seconds = t0.elapsed().as_secs_f64();
    println!(
        "{path}: {} entries taken in {seconds:.3} s ({:.1} MB/s); held at most {:?}",
        hook.taken,
        len as f64 / 1e6 / seconds,
        decoded.stats
    );
}
