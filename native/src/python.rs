//! The Python module `rmq_spark._native`: the gatherer and the columns it hands to pyarrow.

use pyo3::exceptions::{PyUnicodeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::arrow::{export_array, export_schema, release_unclaimed_array, release_unclaimed_schema, Column};
use crate::columns::{AddError, Gathered, Wanted};

/// One column, for `pyarrow.array(column)` (the `__arrow_c_array__` protocol); it can be taken once.
#[pyclass(module = "rmq_spark._native", frozen)]
struct ArrowColumn {
    column: std::sync::Mutex<Option<Column>>,
}

#[pymethods]
impl ArrowColumn {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema; // the column has one type; pyarrow casts if it asked for another
        let column = self
            .column
            .lock()
            .unwrap()
            .take()
            .ok_or_else(|| PyValueError::new_err("this column was already handed to pyarrow"))?;
        let schema = PyCapsule::new_with_destructor(py, export_schema(&column), Some(c"arrow_schema".into()), |s, _| {
            release_unclaimed_schema(s)
        })?;
        let array = PyCapsule::new_with_destructor(py, export_array(column), Some(c"arrow_array".into()), |a, _| {
            release_unclaimed_array(a)
        })?;
        Ok((schema, array))
    }
}

/// Gathers pulled PULL_MESSAGE bodies into the columns named at construction.
#[pyclass(module = "rmq_spark._native")]
struct BlockGatherer {
    gathered: Gathered,
}

#[pymethods]
impl BlockGatherer {
    /// `columns`: source column names to build; `tags`: keep only messages whose TAGS is one of these (None: all).
    #[new]
    #[pyo3(signature = (columns, tags=None))]
    fn new(columns: Vec<String>, tags: Option<Vec<String>>) -> PyResult<Self> {
        let want = Wanted::of(columns.iter().map(String::as_str))
            .map_err(|name| PyValueError::new_err(format!("no native column {name:?}")))?;
        let tags = tags.map(|set| set.into_iter().map(String::into_bytes).collect());
        Ok(BlockGatherer { gathered: Gathered::new(want, tags) })
    }

    /// Gathers the records of `block` with `low <= queueOffset < high`; False (nothing gathered) when one needs
    /// the message decoder. ValueError for a malformed block, UnicodeError for text that is not UTF-8,
    /// OverflowError for a timestamp out of the microsecond range; nothing is gathered then.
    fn add(&mut self, py: Python<'_>, block: &[u8], low: i64, high: i64) -> PyResult<bool> {
        let gathered = &mut self.gathered;
        match py.detach(|| gathered.add(block, low, high)) {
            Ok(plain) => Ok(plain),
            Err(AddError::Malformed(text)) => Err(PyValueError::new_err(text)),
            Err(AddError::InvalidText) => Err(PyUnicodeError::new_err("topic or properties are not valid UTF-8")),
            Err(AddError::Timestamp) => Err(pyo3::exceptions::PyOverflowError::new_err(
                "a message timestamp is out of the range of microsecond timestamps",
            )),
        }
    }

    /// Rows gathered since the last take.
    #[getter]
    fn rows(&self) -> usize {
        self.gathered.rows()
    }

    /// Bytes of the blocks gathered since the last take.
    #[getter]
    fn nbytes(&self) -> usize {
        self.gathered.bytes()
    }

    /// The gathered columns as (name, column) pairs; the gatherer is empty again.
    fn take(&mut self) -> Vec<(&'static str, ArrowColumn)> {
        self.gathered
            .take()
            .into_iter()
            .map(|(name, column)| (name, ArrowColumn { column: std::sync::Mutex::new(Some(column)) }))
            .collect()
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BlockGatherer>()?;
    m.add_class::<ArrowColumn>()?;
    Ok(())
}
