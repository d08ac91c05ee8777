import Foundation
import Strata
import StrataEngine

// The zone's cascades: which model a delete takes with it is decided by the
// zone's order, not by what a store holds now, so the replica remembers the
// zone's value of each to-one whose target's delete cascades.
//
// `sync.links`: target identifier (16 bytes), source identifier (16 bytes),
// field name (UTF-8) → empty.
// `sync.linkOf`: source identifier (16 bytes), field name (UTF-8) → target
// identifier (16 bytes).

extension SyncReplica {
    /// Whether `property` is a to-one whose target's delete takes the model
    /// with it (the inverse to-many deletes by `.cascade`).
    static func cascades(_ property: Schema.Property, _ entity: Schema.Entity, _ schema: Schema) -> Bool {
        guard let relationship = property as? Schema.Relationship, relationship.isToOneRelationship,
            let inverse = InverseGraph.inverse(of: entity.type, field: relationship.field),
            let side = schema.entity(forType: inverse.type)?.properties[inverse.field] as? Schema.Relationship
        else { return false }
        return side.deleteRule == .cascade
    }

    /// The zone's values of cascading to-ones: `sync.links` holds
    /// (target, source, field) → empty and `sync.linkOf` holds
    /// (source, field) → target. Changes are gathered, then written with the
    /// save that applies them.
    struct Links {
        static let byTarget = "sync.links"
        static let bySource = "sync.linkOf"
        /// Source → field → new target (nil: none).
        var changed: [SyncID: [String: SyncID?]] = [:]

        mutating func set(_ source: SyncID, _ field: String, to target: SyncID?) {
            changed[source, default: [:]][field] = .some(target)
        }

        /// Models whose cascading to-one the zone last pointed at `target`.
        func sources(of target: SyncID, in store: Store) throws -> [SyncID] {
            var result: [SyncID] = []
            for (source, fields) in changed where fields.values.contains(where: { $0 == target }) { result.append(source) }
            try store.read { tx in
                guard let tree = try tx.treeIfPresent(Self.byTarget) else { return }
                let cursor = try tx.cursor(tree)
                var more = try cursor.seek(target.bytes)
                while more {
                    let key = try cursor.key()
                    guard key.count > 32, Array(key[0..<16]) == target.bytes else { break }
                    let source = SyncID(bytes: Array(key[16..<32]))
                    let field = String(decoding: key[32...], as: UTF8.self)
                    // A field this change set moved elsewhere no longer counts.
                    let moved = changed[source]?[field].map { $0 != target } ?? false
                    if !moved && !result.contains(source) { result.append(source) }
                    more = try cursor.next()
                }
            }
            return result
        }

        func write(_ tx: WriteTransaction) throws {
            guard !changed.isEmpty else { return }
            let byTarget = try tx.treeIfPresent(Self.byTarget) ?? tx.createTree(Self.byTarget)
            let bySource = try tx.treeIfPresent(Self.bySource) ?? tx.createTree(Self.bySource)
            for (source, fields) in changed {
                for (field, target) in fields {
                    let sourceKey = source.bytes + Array(field.utf8)
                    if let old = try tx.get(sourceKey, in: bySource) {
                        try tx.delete(old + sourceKey, in: byTarget)
                        try tx.delete(sourceKey, in: bySource)
                    }
                    if let target {
                        try tx.put(sourceKey, target.bytes, in: bySource)
                        try tx.put(target.bytes + sourceKey, [], in: byTarget)
                    }
                }
            }
        }

        /// Drops a deleted model's own links (those pointing at it stay:
        /// their models are deleted too, or were moved).
        func forget(_ source: SyncID, _ tx: WriteTransaction) throws {
            guard let bySource = try tx.treeIfPresent(Self.bySource), let byTarget = try tx.treeIfPresent(Self.byTarget)
            else { return }
            var keys: [([UInt8], [UInt8])] = []
            let cursor = try tx.cursor(bySource)
            var more = try cursor.seek(source.bytes)
            while more {
                let key = try cursor.key()
                guard key.count >= 16, Array(key[0..<16]) == source.bytes else { break }
                keys.append((key, try cursor.value()))
                more = try cursor.next()
            }
            for (key, target) in keys {
                try tx.delete(key, in: bySource)
                try tx.delete(target + key, in: byTarget)
            }
        }
    }
}
