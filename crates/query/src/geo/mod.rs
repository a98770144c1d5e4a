//! Geospatial queries: geometries ([`shape`]), spherical geometry ([`sphere`]), the query
//! operators ([`pred`]), distance ordering ([`near`]) and index cells ([`cells`]).

pub mod bbox;
pub mod cells;
pub mod near;
pub mod pred;
pub mod shape;
pub mod sphere;

pub use pred::{GeoPred, Near};
