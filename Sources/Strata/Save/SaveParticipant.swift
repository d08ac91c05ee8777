import StrataEngine

/// A part of the program that commits writes of its own with a save, in the
/// save's write transaction, so that the two are durable together or not
/// at all. `StrataSync` is the one participant: it records what it applied
/// of a pulled change in the save that applies it.
///
/// What a participant sees: the save's change set and its open
/// transaction (``SaveParticipation``), once the save has written its rows,
/// indexes, history and delete rules, and before the store's own checks
/// and the commit. Reads in that transaction see the store as the save
/// leaves it.
///
/// What it may write: trees of its own, whose names begin with a prefix of
/// its own (sync's is `sync.`) and with none of the store's (`e.`, `i.`,
/// `u.`, `r.`, `j.`, `h.`, `strata.`). Nothing enforces this: the
/// participant is the package's own code. The store's rows, indexes, catalog and
/// history are the save's: a write there would escape the save's checks
/// and the other contexts' merge.
///
/// What a throw does: the save is abandoned, as any failed save is. The
/// store is unchanged and the context keeps its pending changes.
///
/// A participant joins one save (``ModelContext/save(with:)``); history it
/// needs kept beyond that save is held with ``HistoryLog/hold(_:after:in:)``.
package protocol SaveParticipant: AnyObject {
    /// Writes the participant's trees for `save`, in `save.transaction`.
    func saveWillCommit(_ save: SaveParticipation) throws
}

/// What a ``SaveParticipant`` is shown of the save it joins.
package struct SaveParticipation {
    /// The save's write transaction, open; the participant neither commits
    /// nor rolls it back.
    package let transaction: WriteTransaction
    /// Models the save inserts, with their final identifiers.
    package let inserted: [PersistentIdentifier]
    /// Models whose changes the save writes.
    package let updated: [PersistentIdentifier]
    /// Models the save deletes, the delete rules' included (rows a rule
    /// deletes without a model in the context are in the history entry).
    package let deleted: [PersistentIdentifier]
    /// The save's history entry, when the store records history.
    package let historyToken: Int64?
}
