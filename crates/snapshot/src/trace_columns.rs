//! The rows of snap_traces held in columns ([`TraceColumns`]): the batch being built, or every
//! row when the sink holds them, with the texts of a batch stored once.

use std::collections::BTreeMap;

use foldhash::HashMap;

use datafusion::arrow::array::BooleanBufferBuilder;

use crate::rows::TraceRow;

/// In the text columns of [`TraceColumns`]: no value.
pub const NULL_TEXT: u32 = u32::MAX;

/// A nullable column that can be set after the fact.
pub struct OptCol<T> {
    pub values: Vec<T>,
    pub valid: BooleanBufferBuilder,
}

impl<T: Copy + Default> OptCol<T> {
    fn new() -> Self {
        OptCol {
            values: Vec::new(),
            valid: BooleanBufferBuilder::new(0),
        }
    }

    fn push(&mut self, value: Option<T>) {
        self.values.push(value.unwrap_or_default());
        self.valid.append(value.is_some());
    }

    pub fn get(&self, row: usize) -> Option<T> {
        self.valid.get_bit(row).then(|| self.values[row])
    }

    fn clear(&mut self) {
        self.values.clear();
        self.valid = BooleanBufferBuilder::new(0);
    }
}

/// The columns that are NULL in nearly every row, kept per row that has any.
#[derive(Debug, Default, Clone)]
pub struct Rare {
    pub device_free: Option<i64>,
    pub pool_id: (Option<i64>, Option<i64>),
    pub forward_stack_id: Option<i64>,
    pub extra_json: Option<String>,
}

impl Rare {
    fn is_empty(&self) -> bool {
        self.device_free.is_none()
            && self.pool_id == (None, None)
            && self.forward_stack_id.is_none()
            && self.extra_json.is_none()
    }
}

/// The distinct texts of a batch's text cells.
struct Texts {
    strings: Vec<Box<str>>,
    ids: HashMap<Box<str>, u32>,
    /// The texts used last.
    recent: [u32; 4],
}

impl Default for Texts {
    fn default() -> Self {
        Texts {
            strings: Vec::new(),
            ids: HashMap::default(),
            recent: [NULL_TEXT; 4],
        }
    }
}

impl Texts {
    fn id(&mut self, text: Option<&str>) -> u32 {
        let Some(text) = text else {
            return NULL_TEXT;
        };
        // Most cells repeat one of a few texts: those are compared before hashing.
        for &id in &self.recent {
            if self.strings.get(id as usize).is_some_and(|s| **s == *text) {
                return id;
            }
        }
        if let Some(&id) = self.ids.get(text) {
            self.remember(id);
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(text.into());
        self.ids.insert(text.into(), id);
        self.remember(id);
        id
    }

    fn remember(&mut self, id: u32) {
        self.recent.rotate_right(1);
        self.recent[0] = id;
    }

    fn get(&self, id: u32) -> Option<&str> {
        (id != NULL_TEXT).then(|| &*self.strings[id as usize])
    }

    fn clear(&mut self) {
        self.strings.clear();
        self.ids.clear();
        self.recent = [NULL_TEXT; 4];
    }
}

/// Rows of snap_traces in (device, seq) order: those of the batch being built, or every row
/// when the sink holds them.
pub struct TraceColumns {
    pub device: Vec<u32>,
    pub seq: Vec<u32>,
    action: Vec<u32>,
    compile_context: Vec<u32>,
    user_metadata: Vec<u32>,
    texts: Texts,
    pub addr: OptCol<u64>,
    pub size: OptCol<i64>,
    pub stream: OptCol<i64>,
    pub time_us: OptCol<i64>,
    /// Stack ids; 0 for none.
    pub stack_id: Vec<u32>,
    pub rare: BTreeMap<u32, Rare>,
    /// Rows of the host's flat trace list: their device is the host's.
    pub host: bool,
    /// The columns derived from the trace (crate::derive).
    pub levels: crate::derive::Levels,
}

impl TraceColumns {
    pub fn new() -> Self {
        TraceColumns {
            device: Vec::new(),
            seq: Vec::new(),
            action: Vec::new(),
            compile_context: Vec::new(),
            user_metadata: Vec::new(),
            texts: Texts::default(),
            addr: OptCol::new(),
            size: OptCol::new(),
            stream: OptCol::new(),
            time_us: OptCol::new(),
            stack_id: Vec::new(),
            rare: BTreeMap::new(),
            host: false,
            levels: Default::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.device.len()
    }

    pub fn action(&self, row: usize) -> Option<&str> {
        self.texts.get(self.action[row])
    }

    pub fn compile_context(&self, row: usize) -> Option<&str> {
        self.texts.get(self.compile_context[row])
    }

    pub fn user_metadata(&self, row: usize) -> Option<&str> {
        self.texts.get(self.user_metadata[row])
    }

    pub fn rare(&self, row: usize) -> Option<&Rare> {
        self.rare.get(&(row as u32))
    }

    /// Appends a row; returns its index.
    pub fn push(&mut self, row: TraceRow) -> usize {
        let index = self.len();
        self.device.push(row.device);
        self.seq.push(row.seq);
        let action = self.texts.id(row.action.as_deref());
        self.action.push(action);
        let context = self.texts.id(row.compile_context.as_deref());
        self.compile_context.push(context);
        let metadata = self.texts.id(row.user_metadata.as_deref());
        self.user_metadata.push(metadata);
        self.addr.push(row.addr);
        self.size.push(row.size);
        self.stream.push(row.stream);
        self.time_us.push(row.time_us);
        self.stack_id
            .push(row.stack_id.map_or(0, |id| u32::try_from(id).unwrap_or(0)));
        let rare = Rare {
            device_free: row.device_free,
            pool_id: row.pool_id,
            forward_stack_id: None,
            extra_json: row.extra_json,
        };
        if !rare.is_empty() {
            self.rare.insert(index as u32, rare);
        }
        index
    }

    pub fn set_forward_stack(&mut self, index: usize, stack: Option<i64>) {
        if stack.is_some() {
            self.rare.entry(index as u32).or_default().forward_stack_id = stack;
        } else if let Some(rare) = self.rare.get_mut(&(index as u32)) {
            rare.forward_stack_id = None;
        }
    }

    /// Text bytes of row `i` that count towards a batch's limit (with `name`, the snapshot's).
    pub fn text_bytes(&self, i: usize, name: usize) -> usize {
        let text = |id: u32| self.texts.get(id).map_or(0, str::len);
        let rare = self
            .rare(i)
            .and_then(|r| r.extra_json.as_ref())
            .map_or(0, String::len);
        name + text(self.action[i])
            + text(self.compile_context[i])
            + text(self.user_metadata[i])
            + rare
    }

    pub fn clear(&mut self) {
        self.device.clear();
        self.seq.clear();
        self.action.clear();
        self.compile_context.clear();
        self.user_metadata.clear();
        self.texts.clear();
        self.addr.clear();
        self.size.clear();
        self.stream.clear();
        self.time_us.clear();
        self.stack_id.clear();
        self.rare.clear();
        self.levels.rows.clear();
    }
}
