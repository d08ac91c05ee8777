import StrataEngine

/// The form of the keys in a store's unique and index trees, recorded in
/// the catalog as `#keys`.
///
/// Format 2 (this one): integers in their significant bytes, an index key's
/// row followed by its length, a unique entry's row in its significant
/// bytes (``KeyEncoding``, ``KeyGroup``). Format 1, in stores written
/// before, has no `#keys` entry: integers in 8 bytes after the codes 0x20
/// and 0x21, the row as the index key's last element, a unique entry's row
/// in 8 bytes. The first writable open of such a store rewrites its key
/// trees in the transaction that checks its schema, before any migration
/// stage reads them; the relationship trees (``PairKey``) keep their form.
enum KeyFormat {
    /// The catalog entry, and the value that names the current format.
    static let catalogKey = Array("#keys".utf8)
    static let current = Array("2".utf8)

    /// True for the trees this format covers: unique (`u.`) and index
    /// (`i.`) trees (``TreeName/keyGroup(_:entity:names:)``).
    static func isKeyTree(_ name: String) -> Bool { name.hasPrefix("u.") || name.hasPrefix("i.") }

    /// True when the store's key trees are in the current format: the
    /// catalog records it, or the store has no key tree to rewrite. A
    /// store that records another format was written by a later Strata:
    /// ``SwiftDataError/loadIssueModelContainer``, rather than a rewrite
    /// that would misread it.
    static func isCurrent(_ tx: ReadTransaction) throws -> Bool {
        if let catalog = try tx.treeIfPresent(StoredSchema.tree), let stored = try tx.get(catalogKey, in: catalog) {
            guard stored == current else {
                throw SwiftDataError(
                    .loadIssueModelContainer,
                    "the store's index keys are in format \(String(decoding: stored, as: UTF8.self)), written by a "
                        + "later Strata than this one (format \(String(decoding: current, as: UTF8.self))); open it with that "
                        + "version or a later one")
            }
            return true
        }
        return try !tx.treeNames().contains(where: isKeyTree)
    }

    /// Rewrites every key tree of format 1 into the current format and
    /// records it. Each tree is read whole, transcoded (the two forms order
    /// the same values the same way, so the keys stay in order), and put
    /// back in order. A key that does not decode is a damaged store:
    /// ``SwiftDataError/corruptRecord``, and the transaction is abandoned.
    static func upgrade(_ tx: WriteTransaction) throws {
        for name in try tx.treeNames() where isKeyTree(name) {
            let tree = try tx.tree(name)
            let unique = name.hasPrefix("u.")
            var keys = KeyBatch(capacity: 0, bytes: 0)
            var values: [[UInt8]] = []
            try tx.forEach(tree) { key, value in
                var elements: [KeyEncoding.Element]
                do {
                    elements = try KeyEncoding.decode(key)
                } catch {
                    throw SwiftDataError(.corruptRecord, "\(name): a key of format 1 that does not decode: \(error)")
                }
                var rewritten: [UInt8]
                if unique {
                    rewritten = KeyEncoding.encode(elements)
                    values.append(KeyGroup.uniqueValue(try RowKey.decode(value)))
                } else {
                    guard case .int(let row)? = elements.popLast() else {
                        throw SwiftDataError(.corruptRecord, "\(name): an index key of format 1 without its row")
                    }
                    rewritten = KeyEncoding.encode(elements)
                    KeyGroup.appendRow(row, to: &rewritten)
                }
                // Format 1 held an index key's row in 9 bytes; a row of 8
                // significant bytes (a subclass's, whose tag is 256 or more)
                // takes 10 now, so a key at the old limit no longer fits.
                guard rewritten.count <= Database.maxKeyLength else {
                    throw SwiftDataError(
                        .loadIssueModelContainer,
                        "\(name): an entry's values take \(rewritten.count - (unique ? 0 : 10)) bytes, one more than "
                            + "this version's keys hold for its row; shorten that value with the Strata that wrote the store, "
                            + "then open it here")
                }
                rewritten.withUnsafeBytes { bytes in keys.append(count: bytes.count) { $0.copyMemory(from: bytes) } }
                return true
            }
            try tx.clear(tree)
            try tx.put(sortedKeys: keys, values: { unique ? values[$0] : [] }, in: tree)
        }
        let catalog = try tx.treeIfPresent(StoredSchema.tree) ?? tx.createTree(StoredSchema.tree)
        try tx.put(catalogKey, current, in: catalog)
    }
}
