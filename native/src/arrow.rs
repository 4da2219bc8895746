//! Columns handed to pyarrow through the Arrow C data interface (the `__arrow_c_array__` PyCapsule protocol):
//! pyarrow takes ownership of the buffers without a copy and frees them through `release`.

use std::ffi::{c_char, c_void, CStr};
use std::ptr;

/// One finished column; no nulls (absent values are the Python side's map lookups).
pub enum Column {
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    /// microseconds since the epoch, UTC
    Timestamp(Vec<i64>),
    Binary { offsets: Vec<i32>, data: Vec<u8> },
    Utf8 { offsets: Vec<i32>, data: Vec<u8> },
    /// strings where `valid` is true, nulls elsewhere
    NullableUtf8 { offsets: Vec<i32>, data: Vec<u8>, valid: Vec<bool> },
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::Int32(v) => v.len(),
            Column::Int64(v) | Column::Timestamp(v) => v.len(),
            Column::Binary { offsets, .. } | Column::Utf8 { offsets, .. } | Column::NullableUtf8 { offsets, .. } => {
                offsets.len() - 1
            }
        }
    }

    fn format(&self) -> &'static CStr {
        match self {
            Column::Int32(_) => c"i",
            Column::Int64(_) => c"l",
            Column::Timestamp(_) => c"tsu:UTC",
            Column::Binary { .. } => c"z",
            Column::Utf8 { .. } | Column::NullableUtf8 { .. } => c"u",
        }
    }
}

#[repr(C)]
pub struct ArrowSchema {
    pub(crate) format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    pub(crate) n_children: i64,
    pub(crate) children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    pub(crate) release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

#[repr(C)]
pub struct ArrowArray {
    pub(crate) length: i64,
    null_count: i64,
    pub(crate) offset: i64,
    pub(crate) n_buffers: i64,
    pub(crate) n_children: i64,
    pub(crate) buffers: *mut *const c_void,
    pub(crate) children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    pub(crate) release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

// Both are moved into a capsule and from there by pyarrow, on whatever thread; the pointers they hold are owned.
unsafe impl Send for ArrowSchema {}
unsafe impl Send for ArrowArray {}

unsafe extern "C" fn release_schema(schema: *mut ArrowSchema) {
    // format and name are static strings: nothing else to free
    (*schema).release = None;
}

/// What an exported array owns: the column's vectors, its validity bitmap and the buffer pointer table into them.
struct Owned {
    _column: Column,
    _validity: Vec<u8>,
    buffers: Vec<*const c_void>,
}

/// Arrow's validity bitmap (bit i of byte i / 8, least significant first) and the null count.
fn bitmap(valid: &[bool]) -> (Vec<u8>, i64) {
    let mut bits = vec![0u8; valid.len().div_ceil(8)];
    let mut nulls = 0;
    for (i, &v) in valid.iter().enumerate() {
        if v {
            bits[i / 8] |= 1 << (i % 8);
        } else {
            nulls += 1;
        }
    }
    (bits, nulls)
}

unsafe extern "C" fn release_array(array: *mut ArrowArray) {
    drop(Box::from_raw((*array).private_data as *mut Owned));
    (*array).release = None;
}

/// The field schema of `column` (unnamed, not nullable).
pub fn export_schema(column: &Column) -> ArrowSchema {
    ArrowSchema {
        format: column.format().as_ptr(),
        name: c"".as_ptr(),
        metadata: ptr::null(),
        flags: 2, // ARROW_FLAG_NULLABLE
        n_children: 0,
        children: ptr::null_mut(),
        dictionary: ptr::null_mut(),
        release: Some(release_schema),
        private_data: ptr::null_mut(),
    }
}

/// The array of `column`, which it now owns until pyarrow releases it.
pub fn export_array(column: Column) -> ArrowArray {
    let length = column.len() as i64;
    let (validity, null_count) = match &column {
        Column::NullableUtf8 { valid, .. } => bitmap(valid),
        _ => (Vec::new(), 0),
    };
    let validity_ptr = if null_count > 0 { validity.as_ptr() as *const c_void } else { ptr::null() };
    let buffers: Vec<*const c_void> = match &column {
        Column::Int32(v) => vec![ptr::null(), v.as_ptr() as *const c_void],
        Column::Int64(v) | Column::Timestamp(v) => vec![ptr::null(), v.as_ptr() as *const c_void],
        Column::Binary { offsets, data } | Column::Utf8 { offsets, data } | Column::NullableUtf8 { offsets, data, .. } => {
            vec![validity_ptr, offsets.as_ptr() as *const c_void, data.as_ptr() as *const c_void]
        }
    };
    let mut owned = Box::new(Owned { _column: column, _validity: validity, buffers });
    let table = owned.buffers.as_mut_ptr();
    let n_buffers = owned.buffers.len() as i64;
    ArrowArray {
        length,
        null_count,
        offset: 0,
        n_buffers,
        n_children: 0,
        buffers: table,
        children: ptr::null_mut(),
        dictionary: ptr::null_mut(),
        release: Some(release_array),
        private_data: Box::into_raw(owned) as *mut c_void,
    }
}

/// Frees what a capsule still holds when pyarrow never took it (release is then still set).
pub fn release_unclaimed_schema(mut schema: ArrowSchema) {
    if let Some(release) = schema.release {
        unsafe { release(&mut schema) }
    }
}

pub fn release_unclaimed_array(mut array: ArrowArray) {
    if let Some(release) = array.release {
        unsafe { release(&mut array) }
    }
}
