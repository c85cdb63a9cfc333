//! A small in-memory key-value store.

use std::collections::HashMap;
use std::fmt;

pub mod error;

use crate::error::Error;

#[derive(Debug, Default)]
pub struct Store {
    entries: HashMap<String, Vec<u8>>,
    limit: usize,
}

impl Store {
    pub fn new(limit: usize) -> Self {
        Store { entries: HashMap::new(), limit }
    }

    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.entries.get(key).map(|v| v.as_slice())
    }

    pub fn put(&mut self, key: &str, value: Vec<u8>) -> Result<(), Error> {
        if self.entries.len() >= self.limit {
            return Err(Error::Full(self.limit));
        }
        let old = self.entries.insert(key.to_string(), value);
        if let Some(prev) = old {
            println!("replaced {} bytes", prev.len());
        }
        Ok(())
    }

    pub fn remove(&mut self, key: &str) -> Result<Vec<u8>, Error> {
        self.entries.remove(key).ok_or_else(|| Error::Missing(key.to_string()))
    }
}

impl fmt::Display for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Store({} entries)", self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_then_get() {
        let mut s = Store::new(2);
        s.put("a", vec![1]).unwrap();
        assert_eq!(s.get("a"), Some(&[1u8][..]));
        let v = s.remove("a").unwrap();
        assert_eq!(v, vec![1]);
    }
}
