//! Arrays lent by pyarrow through the Arrow C data interface, read in place: the sink's input columns. Only the
//! layouts the sink takes are read (Python casts its columns to them first): strings and binaries with 32-bit
//! offsets, int32 and int64, lists of strings and maps of string to string. Slices (an array's offset) are honoured
//! at every level.

use std::ffi::{c_void, CStr};
use std::slice;

use crate::arrow::{ArrowArray, ArrowSchema};

/// One array and its schema, borrowed for `'a` (the caller keeps pyarrow's capsules alive that long).
#[derive(Clone, Copy)]
pub struct Lent<'a> {
    array: &'a ArrowArray,
    schema: &'a ArrowSchema,
}

impl<'a> Lent<'a> {
    /// # Safety
    /// Both pointers are valid, released by no one, and agree (the array was exported with that schema) for `'a`.
    pub unsafe fn new(array: *const ArrowArray, schema: *const ArrowSchema) -> Result<Self, String> {
        if array.is_null() || schema.is_null() || (*array).release.is_none() || (*schema).release.is_none() {
            return Err("an Arrow array or schema that is null or already released".into());
        }
        Ok(Lent { array: &*array, schema: &*schema })
    }

    pub fn format(&self) -> &'a [u8] {
        unsafe { CStr::from_ptr(self.schema.format) }.to_bytes()
    }

    pub fn len(&self) -> usize {
        self.array.length as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn offset(&self) -> usize {
        self.array.offset as usize
    }

    /// `n` values of buffer `i` (null when the buffer is absent and `n` is 0).
    fn buffer<T>(&self, i: usize, n: usize) -> Result<&'a [T], String> {
        if i >= self.array.n_buffers as usize {
            return Err(format!("an Arrow array of type {:?} without buffer {i}", self.format_text()));
        }
        let p = unsafe { *self.array.buffers.add(i) } as *const T;
        if p.is_null() {
            return if n == 0 { Ok(&[]) } else { Err(format!("an Arrow array of type {:?} with a null buffer {i}", self.format_text())) };
        }
        Ok(unsafe { slice::from_raw_parts(p, n) })
    }

    fn validity(&self) -> Result<Option<&'a [u8]>, String> {
        let p = unsafe { *self.array.buffers } as *const c_void;
        if p.is_null() {
            return Ok(None);
        }
        self.buffer::<u8>(0, (self.offset() + self.len()).div_ceil(8)).map(Some)
    }

    fn child(&self, i: usize) -> Result<Lent<'a>, String> {
        if i >= self.array.n_children as usize || i >= self.schema.n_children as usize {
            return Err(format!("an Arrow array of type {:?} without child {i}", self.format_text()));
        }
        unsafe { Lent::new(*self.array.children.add(i), *self.schema.children.add(i)) }
    }

    fn format_text(&self) -> String {
        String::from_utf8_lossy(self.format()).into_owned()
    }

    fn expect(&self, formats: &[&[u8]], what: &str) -> Result<(), String> {
        if formats.contains(&self.format()) {
            Ok(())
        } else {
            Err(format!("{what} came as Arrow type {:?}", self.format_text()))
        }
    }
}

fn bit(bits: Option<&[u8]>, i: usize) -> bool {
    bits.is_none_or(|b| b[i / 8] >> (i % 8) & 1 == 1)
}

/// A string or binary array (32-bit offsets).
#[derive(Clone, Copy)]
pub struct Strs<'a> {
    offsets: &'a [i32],
    data: &'a [u8],
    valid: Option<&'a [u8]>,
    offset: usize,
    len: usize,
}

impl<'a> Strs<'a> {
    pub fn of(a: Lent<'a>, what: &str) -> Result<Self, String> {
        a.expect(&[b"u", b"z"], what)?;
        let n = a.offset() + a.len();
        let offsets = a.buffer::<i32>(1, n + 1)?;
        let end = offsets[n];
        if end < 0 || offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err(format!("{what}: Arrow offsets out of order"));
        }
        Ok(Strs { offsets, data: a.buffer::<u8>(2, end as usize)?, valid: a.validity()?, offset: a.offset(), len: a.len() })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Value `i` (None for a null).
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        let j = i + self.offset;
        if !bit(self.valid, j) {
            return None;
        }
        Some(&self.data[self.offsets[j] as usize..self.offsets[j + 1] as usize])
    }
}

/// An int32 or int64 array.
#[derive(Clone, Copy)]
pub struct Ints<'a, T> {
    values: &'a [T],
    valid: Option<&'a [u8]>,
    offset: usize,
    len: usize,
}

impl<'a, T: Copy> Ints<'a, T> {
    pub fn of(a: Lent<'a>, format: &[u8], what: &str) -> Result<Self, String> {
        a.expect(&[format], what)?;
        Ok(Ints { values: a.buffer::<T>(1, a.offset() + a.len())?, valid: a.validity()?, offset: a.offset(), len: a.len() })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, i: usize) -> Option<T> {
        let j = i + self.offset;
        bit(self.valid, j).then(|| self.values[j])
    }
}

/// The entries of row `i` of a list or map: a range of its child's positions.
fn entries(offsets: &[i32], valid: Option<&[u8]>, offset: usize, i: usize) -> Option<std::ops::Range<usize>> {
    let j = i + offset;
    bit(valid, j).then(|| offsets[j] as usize..offsets[j + 1] as usize)
}

fn list_offsets<'a>(a: &Lent<'a>) -> Result<&'a [i32], String> {
    let n = a.offset() + a.len();
    let offsets = a.buffer::<i32>(1, n + 1)?;
    if offsets.first().is_some_and(|&o| o < 0) || offsets.windows(2).any(|w| w[0] > w[1]) {
        return Err("Arrow list offsets out of order".into());
    }
    Ok(offsets)
}

/// A list of strings.
#[derive(Clone, Copy)]
pub struct StrLists<'a> {
    offsets: &'a [i32],
    valid: Option<&'a [u8]>,
    offset: usize,
    len: usize,
    items: Strs<'a>,
}

impl<'a> StrLists<'a> {
    pub fn of(a: Lent<'a>, what: &str) -> Result<Self, String> {
        a.expect(&[b"+l"], what)?;
        let items = Strs::of(a.child(0)?, what)?;
        let offsets = list_offsets(&a)?;
        if offsets[a.offset() + a.len()] as usize > items.len() {
            return Err(format!("{what}: list offsets past its items"));
        }
        Ok(StrLists { offsets, valid: a.validity()?, offset: a.offset(), len: a.len(), items })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The items of row `i` (None for a null list).
    pub fn get(&self, i: usize) -> Option<impl Iterator<Item = Option<&'a [u8]>> + '_> {
        entries(self.offsets, self.valid, self.offset, i).map(|r| r.map(|k| self.items.get(k)))
    }
}

/// A map of string to string.
#[derive(Clone, Copy)]
pub struct StrMaps<'a> {
    offsets: &'a [i32],
    valid: Option<&'a [u8]>,
    offset: usize,
    len: usize,
    entry_offset: usize,
    keys: Strs<'a>,
    values: Strs<'a>,
}

impl<'a> StrMaps<'a> {
    pub fn of(a: Lent<'a>, what: &str) -> Result<Self, String> {
        a.expect(&[b"+m"], what)?;
        let entries = a.child(0)?;
        entries.expect(&[b"+s"], what)?;
        let (keys, values) = (Strs::of(entries.child(0)?, what)?, Strs::of(entries.child(1)?, what)?);
        let offsets = list_offsets(&a)?;
        let end = offsets[a.offset() + a.len()] as usize + entries.offset();
        if end > keys.len() || end > values.len() {
            return Err(format!("{what}: map offsets past its entries"));
        }
        Ok(StrMaps {
            offsets,
            valid: a.validity()?,
            offset: a.offset(),
            len: a.len(),
            entry_offset: entries.offset(),
            keys,
            values,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The (key, value) pairs of row `i` in map order (a null value as None); None for a null map.
    pub fn get(&self, i: usize) -> Option<impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + '_> {
        entries(self.offsets, self.valid, self.offset, i).map(|r| {
            r.map(|k| (self.keys.get(k + self.entry_offset).unwrap_or_default(), self.values.get(k + self.entry_offset)))
        })
    }
}
