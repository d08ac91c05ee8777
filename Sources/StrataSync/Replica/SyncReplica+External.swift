import Crypto
import Foundation
import Strata
import StrataEngine

// `.externalStorage` values in sync. A change carries a reference to the
// value (wire type ``SyncChangeSet/external``: its SHA-256 and length),
// never the bytes; the bytes go to the zone's parts on the server
// (``ExternalReference/partSize`` each), stored once per zone however many
// models and changes share them, and are read back by their digest.
//
// - `sync.blobsOut`: digest (32 bytes) → the value as the model's tree
//   stores it (``ExternalBlob``), for each value an outbox entry refers
//   to: copied when the entry is built, so that a later save that changes
//   or deletes the value does not take the bytes the entry names. Emptied
//   once the outbox is.
// - `sync.blobsIn`: digest (32 bytes) + part number (4 bytes, big-endian)
//   → the part's bytes, downloaded for changes not applied yet. A value is
//   checked against its digest once all its parts are here, and its parts
//   are dropped when it does not match (never stored into a model), so
//   the next round downloads them again; an interrupted download resumes
//   at the parts it lacks. Emptied once a pull has applied everything.

/// A reference to an `.externalStorage` value: its SHA-256 and length.
package struct ExternalReference: Hashable, Sendable, CustomStringConvertible {
    /// The SHA-256 of the value (32 bytes).
    package let digest: [UInt8]
    /// The value's length in bytes.
    package let length: Int

    /// The size of a part on the server (the last one is shorter).
    package static let partSize = 1 << 20
    /// The largest value accepted from a server: Strata's own ceiling.
    static let maximumLength = 1 << 30

    package init(digest: [UInt8], length: Int) {
        self.digest = digest
        self.length = length
    }

    /// The reference of `data`.
    package init(of data: some DataProtocol) {
        self.init(digest: Array(SHA256.hash(data: data)), length: data.count)
    }

    /// How many parts the value has on the server (an empty value has
    /// none).
    package var parts: Int { (length + Self.partSize - 1) / Self.partSize }

    /// The bytes of part `part` of `value`.
    package static func part(_ part: Int, of value: [UInt8]) -> ArraySlice<UInt8> {
        let start = part * partSize
        return value[min(start, value.count)..<min(start + partSize, value.count)]
    }

    /// The field value: the digest, then the length as a varint.
    var encoded: [UInt8] {
        var out = digest
        Varint.append(UInt64(length), to: &out)
        return out
    }

    /// The reference a field value holds; nil for a nil value (no bytes).
    /// Throws for bytes that are not one.
    static func decode(_ value: [UInt8]) throws(SyncPayloadError) -> ExternalReference? {
        guard !value.isEmpty else { return nil }
        guard value.count > 32 else { throw SyncPayloadError("an external reference of \(value.count) bytes") }
        let length: UInt64? = value.withUnsafeBytes { raw in
            var input = ByteReader(UnsafeRawBufferPointer(rebasing: raw[32...]))
            guard let length = try? input.varint(), input.index == raw.count - 32 else { return nil }
            return length
        }
        guard let length, length <= UInt64(maximumLength) else {
            throw SyncPayloadError("an external reference with a bad length")
        }
        return ExternalReference(digest: Array(value[..<32]), length: Int(length))
    }

    package var description: String {
        digest.prefix(8).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
            .joined() + "… (\(length) bytes)"
    }
}

extension SyncReplica {
    static let blobsOutTree = "sync.blobsOut"
    static let blobsInTree = "sync.blobsIn"

    /// An `.externalStorage` value a change refers to that this store does
    /// not hold: it was not downloaded (the worker downloads every value a
    /// change refers to before applying it).
    package struct MissingExternal: Error, CustomStringConvertible {
        package let reference: ExternalReference
        package var description: String { "external value \(reference) is not downloaded" }
    }

    /// The field of `entity`'s `.externalStorage` attribute `property` for
    /// the model at `row`: a reference to its value (nothing for nil). The
    /// value is kept in `sync.blobsOut` until the outbox is empty.
    static func externalField(
        _ property: Schema.Property, tree: String, entity: Schema.Entity, row: Int64, _ tx: WriteTransaction
    ) throws -> SyncChangeSet.Field {
        guard let values = try tx.treeIfPresent(tree), let stored = try tx.get(RowKey.encode(row), in: values) else {
            return SyncChangeSet.Field(name: property.name, wire: SyncChangeSet.external, value: [])
        }
        guard let data = ExternalBlob.decode(stored) else {
            throw SwiftDataError(.corruptRecord, "\(entity.name) row \(row): its \(property.name) does not decode")
        }
        let reference = ExternalReference(of: data)
        let out = try tx.treeIfPresent(blobsOutTree) ?? tx.createTree(blobsOutTree)
        if try tx.get(reference.digest, in: out) == nil { try tx.put(reference.digest, stored, in: out) }
        return SyncChangeSet.Field(name: property.name, wire: SyncChangeSet.external, value: reference.encoded)
    }

    /// The external values the encoded change set `payload` refers to, each
    /// once. Throws for a payload that does not decode.
    package static func externalReferences(in payload: [UInt8]) throws -> [ExternalReference] {
        try externalReferences(in: SyncChangeSet.decode(payload))
    }

    static func externalReferences(in set: SyncChangeSet) throws -> [ExternalReference] {
        var seen = Set<ExternalReference>()
        var result: [ExternalReference] = []
        for change in set.changes {
            for field in change.fields where field.wire == SyncChangeSet.external {
                if let reference = try ExternalReference.decode(field.value), seen.insert(reference).inserted {
                    result.append(reference)
                }
            }
        }
        return result
    }

    /// The external values the downloaded snapshot at `through` refers to.
    package func snapshotExternalReferences(through: Int64) throws -> [ExternalReference] {
        try store.read { tx in
            guard let tree = try tx.treeIfPresent(Self.restoreTree) else { return [] }
            var seen = Set<ExternalReference>()
            var result: [ExternalReference] = []
            var failure: (any Error)?
            try tx.forEach(tree, from: RowKey.encode(through)) { key, value in
                guard Array(key.prefix(8)) == RowKey.encode(through) else { return false }
                do {
                    for reference in try Self.externalReferences(in: value) where seen.insert(reference).inserted {
                        result.append(reference)
                    }
                } catch {
                    failure = DamagedChange(seq: through, reason: "snapshot: \(error)")
                    return false
                }
                return true
            }
            if let failure { throw failure }
            return result
        }
    }

    /// The value `reference` names, as this store holds it to upload it
    /// (`sync.blobsOut`); nil when it holds none.
    package func outgoingValue(_ reference: ExternalReference) throws -> [UInt8]? {
        let stored = try store.read { tx in
            try tx.treeIfPresent(Self.blobsOutTree).flatMap { try tx.get(reference.digest, in: $0) }
        }
        return stored.flatMap(ExternalBlob.decode).map { Array($0) }
    }

    /// Which parts of `reference` still have to be downloaded: none when
    /// the store holds the value to upload it, or every part downloaded.
    package func partsToDownload(_ reference: ExternalReference) throws -> [Int] {
        try partsToDownload([reference]).first?.parts ?? []
    }

    /// ``partsToDownload(_:)-(ExternalReference)`` of each of `references`,
    /// those with parts to download only.
    package func partsToDownload(_ references: [ExternalReference]) throws
        -> [(reference: ExternalReference, parts: [Int])]
    {
        try store.read { tx in
            let out = try tx.treeIfPresent(Self.blobsOutTree)
            let staged = try tx.treeIfPresent(Self.blobsInTree)
            var result: [(reference: ExternalReference, parts: [Int])] = []
            for reference in references {
                if let out, try tx.get(reference.digest, in: out) != nil { continue }
                let parts = try (0..<reference.parts).filter { part in
                    try staged.map { try tx.get(Self.partKey(reference, part), in: $0) == nil } ?? true
                }
                if !parts.isEmpty { result.append((reference, parts)) }
            }
            return result
        }
    }

    /// Keeps downloaded parts of values (each the digest, the part number
    /// and its bytes) until their changes are applied. A part of a length
    /// the reference does not give is refused, and nothing is kept.
    package func keepParts(_ parts: [(reference: ExternalReference, part: Int, bytes: [UInt8])]) throws(DamagedExternal) {
        for (reference, part, bytes) in parts {
            let start = part * ExternalReference.partSize
            let size = min(ExternalReference.partSize, max(0, reference.length - start))
            guard part < reference.parts, bytes.count == size else {
                throw DamagedExternal(reference: reference, reason: "part \(part) has \(bytes.count) bytes, not \(size)")
            }
        }
        do {
            try store.write { tx in
                let tree = try tx.treeIfPresent(Self.blobsInTree) ?? tx.createTree(Self.blobsInTree)
                for (reference, part, bytes) in parts { try tx.put(Self.partKey(reference, part), bytes, in: tree) }
            }
        } catch {
            throw DamagedExternal(reference: parts[0].reference, reason: "keeping its parts: \(error)")
        }
    }

    /// Checks values whose parts are all downloaded against their digests;
    /// drops the parts of each that does not match (so that the next round
    /// downloads them again) and throws for the first.
    package func checkDownloaded(_ references: [ExternalReference]) throws(DamagedExternal) {
        guard let first = references.first else { return }
        let damaged: [ExternalReference]
        do {
            damaged = try store.read { tx in
                guard let tree = try tx.treeIfPresent(Self.blobsInTree) else { return references }
                return try references.filter { reference in
                    var hasher = SHA256()
                    var length = 0
                    for part in 0..<reference.parts {
                        guard let bytes = try tx.get(Self.partKey(reference, part), in: tree) else { return true }
                        hasher.update(data: bytes)
                        length += bytes.count
                    }
                    return length != reference.length || Array(hasher.finalize()) != reference.digest
                }
            }
            guard !damaged.isEmpty else { return }
            try store.write { tx in
                guard let tree = try tx.treeIfPresent(Self.blobsInTree) else { return }
                for reference in damaged {
                    for part in 0..<reference.parts { try tx.delete(Self.partKey(reference, part), in: tree) }
                }
            }
        } catch {
            throw DamagedExternal(reference: first, reason: "reading its parts: \(error)")
        }
        throw DamagedExternal(reference: damaged[0], reason: "its parts do not match its digest")
    }

    /// An external value whose downloaded parts are not the value its
    /// reference names.
    package struct DamagedExternal: Error, CustomStringConvertible {
        package let reference: ExternalReference
        package let reason: String
        package var description: String { "external value \(reference): \(reason)" }
    }

    /// Drops the downloaded parts (every change that referred to them is
    /// applied) but those of the parts of changes kept for a later schema
    /// (`sync.kept`, applied after a migration, with no server at hand),
    /// and the values kept to upload once the outbox is empty.
    package func forgetExternalValues() throws {
        try store.write { tx in
            if let staged = try tx.treeIfPresent(Self.blobsInTree) {
                var needed = Set<[UInt8]>()
                if let kept = try tx.treeIfPresent(Self.keptTree) {
                    var payloads: [[UInt8]] = []
                    try tx.forEach(kept) { _, value in
                        payloads.append(value)
                        return true
                    }
                    for payload in payloads {
                        // A kept part that does not decode fails its apply.
                        for reference in (try? Self.externalReferences(in: payload)) ?? [] {
                            needed.insert(reference.digest)
                        }
                    }
                }
                if needed.isEmpty {
                    try tx.dropTree(Self.blobsInTree)
                } else {
                    var drop: [[UInt8]] = []
                    try tx.forEach(staged) { key, _ in
                        if !needed.contains(Array(key.prefix(32))) { drop.append(key) }
                        return true
                    }
                    for key in drop { try tx.delete(key, in: staged) }
                }
            }
            if try tx.treeIfPresent(Self.blobsOutTree) != nil {
                let outbox = try tx.treeIfPresent(Self.outboxTree)
                var empty = true
                if let outbox {
                    try tx.forEach(outbox) { _, _ in
                        empty = false
                        return false
                    }
                }
                if empty { try tx.dropTree(Self.blobsOutTree) }
            }
        }
    }

    /// `fields` with each external reference replaced by its value, as a
    /// record holds data (length-delimited), for ``record(_:entity:)``.
    func inliningExternal(_ fields: [SyncChangeSet.Field], seq: Int64) throws -> [SyncChangeSet.Field] {
        guard fields.contains(where: { $0.wire == SyncChangeSet.external }) else { return fields }
        return try fields.map { field in
            guard field.wire == SyncChangeSet.external else { return field }
            let reference: ExternalReference?
            do {
                reference = try ExternalReference.decode(field.value)
            } catch {
                throw DamagedChange(seq: seq, reason: "\(field.name): \(error)")
            }
            guard let reference else { return SyncChangeSet.Field(name: field.name, wire: RecordFormat.null, value: []) }
            let value = try store.read { tx -> [UInt8]? in
                if let out = try tx.treeIfPresent(Self.blobsOutTree), let stored = try tx.get(reference.digest, in: out) {
                    return ExternalBlob.decode(stored).map { Array($0) }
                }
                // An empty value has no parts to download.
                guard reference.length > 0 else { return [] }
                guard let tree = try tx.treeIfPresent(Self.blobsInTree) else { return nil }
                var value: [UInt8] = []
                value.reserveCapacity(reference.length)
                for part in 0..<reference.parts {
                    guard let bytes = try tx.get(Self.partKey(reference, part), in: tree) else { return nil }
                    value += bytes
                }
                return value
            }
            guard let value, value.count == reference.length else { throw MissingExternal(reference: reference) }
            var encoded: [UInt8] = []
            encoded.reserveCapacity(value.count + 10)
            Varint.append(UInt64(value.count), to: &encoded)
            encoded += value
            return SyncChangeSet.Field(name: field.name, wire: RecordFormat.lengthDelimited, value: encoded)
        }
    }

    private static func partKey(_ reference: ExternalReference, _ part: Int) -> [UInt8] {
        reference.digest + withUnsafeBytes(of: UInt32(part).bigEndian) { Array($0) }
    }
}
