//! A list that keeps only its most recent `N` items.

use serde::{Deserialize, Deserializer, Serialize};

/// A list holding at most `N` items: pushing onto a full list drops the oldest.
///
/// Used where SPEC caps what a task keeps (teammate messages at 50, dream turns at 30, an
/// agent's recent activities at 5). The cap is part of the type, so no code path, not even
/// deserializing an oversized snapshot, can hold more than `N` items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct CappedVec<T, const N: usize>(Vec<T>);

impl<T, const N: usize> CappedVec<T, N> {
    /// The cap.
    pub const CAPACITY: usize = N;

    /// An empty list.
    pub const fn new() -> Self {
        CappedVec(Vec::new())
    }

    /// Appends `item`, dropping the oldest item first if the list is full.
    pub fn push(&mut self, item: T) {
        if N == 0 {
            return;
        }
        if self.0.len() == N {
            self.0.remove(0);
        }
        self.0.push(item);
    }

    /// A copy of this list with `item` appended (the oldest dropped if it was full).
    pub fn with(&self, item: T) -> Self
    where
        T: Clone,
    {
        let mut next = self.clone();
        next.push(item);
        next
    }

    /// The items, oldest first.
    pub fn as_slice(&self) -> &[T] {
        &self.0
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The items, oldest first.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }
}

impl<T, const N: usize> Default for CappedVec<T, N> {
    fn default() -> Self {
        CappedVec::new()
    }
}

impl<T, const N: usize> FromIterator<T> for CappedVec<T, N> {
    /// Keeps the last `N` items of the iterator.
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut list = CappedVec::new();
        for item in iter {
            list.push(item);
        }
        list
    }
}

impl<'a, T, const N: usize> IntoIterator for &'a CappedVec<T, N> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for CappedVec<T, N> {
    /// Keeps the last `N` items of an oversized list.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Vec::<T>::deserialize(deserializer)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn push_past_the_cap_drops_the_oldest() {
        let mut list = CappedVec::<u32, 3>::new();
        for i in 0..5 {
            list.push(i);
        }
        assert_eq!(list.as_slice(), &[2, 3, 4]);
    }

    #[test]
    fn with_returns_a_new_list_and_leaves_the_old_one() {
        let full: CappedVec<u32, 2> = [1, 2].into_iter().collect();
        let next = full.with(3);
        assert_eq!(full.as_slice(), &[1, 2]);
        assert_eq!(next.as_slice(), &[2, 3]);
    }

    #[test]
    fn deserializing_an_oversized_list_keeps_the_newest() {
        let list: CappedVec<u32, 2> = serde_json::from_str("[1,2,3,4]").unwrap();
        assert_eq!(list.as_slice(), &[3, 4]);
        assert_eq!(serde_json::to_string(&list).unwrap(), "[3,4]");
    }
}
