use std::fmt;

#[derive(Debug, PartialEq)]
pub enum Error {
    Full(usize),
    Missing(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Full(n) => write!(f, "store is full ({} entries)", n),
            Error::Missing(k) => write!(f, "no entry {}", k),
        }
    }
}

impl std::error::Error for Error {}
