/// The names of the trees the object layer keeps in a store: built here and
/// nowhere else. The "Object mapping" article lists each tree with its keys
/// and values.
enum TreeName {
    /// The stored schema: entity name → its description.
    static let schema = "strata.schema"
    /// The store's identity (a UUID made at its first writable open).
    static let identity = "strata.store"
    /// The mark of the last save over several stores.
    static let saveMarks = "strata.saves"
    /// History: token → one save's changes.
    static let historyTransactions = "h.transactions"
    /// History's counters (last token, deleted-through token).
    static let historyMeta = "h.meta"
    /// History's holds: holder → the token after which it keeps history.
    static let historyHolds = "h.holds"

    /// The records of entity `entity`: row id → record.
    static func records(_ entity: String) -> String { "e." + entity }

    /// A migration's copy of a record tree, renamed over it at the end.
    static func migrating(_ recordTree: String) -> String { recordTree + "~migrating" }

    /// A unique constraint's or an index's tree, over properties `names` in
    /// declaration order.
    static func keyGroup(_ kind: KeyGroup.Kind, entity: String, names: some Sequence<some StringProtocol>) -> String {
        (kind == .unique ? "u." : "i.") + entity + "." + names.joined(separator: "+")
    }

    /// The reverse index of to-one `relationship`: (target row, own row).
    static func toOneIndex(entity: String, relationship: String) -> String { "r.\(entity).\(relationship)" }

    /// The join tree of to-many `relationship`: (own row, target row).
    static func join(entity: String, relationship: String) -> String { "j.\(entity).\(relationship)" }

    /// The mirror of a join tree: (target row, own row).
    static func mirror(entity: String, relationship: String) -> String { "m.\(entity).\(relationship)" }

    /// The mirror of join tree `j.<Entity>.<relationship>`.
    static func mirror(ofJoin tree: String) -> String { "m." + tree.dropFirst(2) }

    /// The tree of an `.externalStorage` attribute: row id → data.
    static func external(entity: String, attribute: String) -> String { "x.\(entity).\(attribute)" }
}
