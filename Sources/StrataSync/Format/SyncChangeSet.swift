import Foundation
import Strata
import StrataEngine

/// One save's changes as sync sends them to other devices: models named by
/// their global identifier, attributes by name with their values in the
/// record format's encoding (so a device of another schema version reads
/// the attributes it knows and skips the rest).
///
/// Format 1, as stored in a server row's payload:
/// format byte 1; the number of changes (varint); each change: kind byte
/// (0 insert, 1 update, 2 delete), entity name (varint length, UTF-8), the
/// 16-byte global identifier, and for an insert or update the number of
/// fields, each: name, wire type byte, the value's length and bytes (a
/// length-delimited value keeps its own length prefix inside). A
/// relationship is a field of wire type ``toOne`` (the target's identifier,
/// or nothing for nil) or ``toMany`` (the targets' identifiers).
///
/// The bytes come from a server and are untrusted: ``decode(_:)`` checks
/// every count and length and throws ``SyncPayloadError``.
package struct SyncChangeSet: Equatable, Sendable {
    package enum Kind: UInt8, Sendable {
        case insert = 0
        case update = 1
        case delete = 2
    }

    package struct Field: Equatable, Sendable {
        package var name: String
        package var wire: UInt8
        package var value: [UInt8]

        package init(name: String, wire: UInt8, value: [UInt8]) {
            self.name = name
            self.wire = wire
            self.value = value
        }

        /// The identifiers a to-one or to-many value names, in order (a
        /// decoded value holds whole ones only).
        package var ids: [SyncID] {
            stride(from: 0, to: value.count - value.count % 16, by: 16).map { SyncID(bytes: Array(value[$0..<$0 + 16])) }
        }
    }

    package struct Change: Equatable, Sendable {
        package var kind: Kind
        package var entity: String
        package var id: SyncID
        package var fields: [Field]

        package init(kind: Kind, entity: String, id: SyncID, fields: [Field] = []) {
            self.kind = kind
            self.entity = entity
            self.id = id
            self.fields = fields
        }
    }

    package var changes: [Change]

    package init(changes: [Change] = []) { self.changes = changes }

    /// The wire type of a to-one relationship: the target's identifier, or
    /// no bytes for nil.
    package static let toOne: UInt8 = 0x10
    /// The wire type of a to-many relationship: its targets' identifiers,
    /// 16 bytes each.
    package static let toMany: UInt8 = 0x11
    /// The wire type of an `.externalStorage` value: its SHA-256 (32
    /// bytes) and length (varint), or no bytes for nil; the value itself
    /// is in the zone's parts (``ExternalReference``).
    package static let external: UInt8 = 0x12

    /// The largest payload accepted from a server, and the largest name.
    package static let maximumPayload = 256 << 20
    static let maximumName = 1024

    package func encode() -> [UInt8] {
        var out: [UInt8] = [1]
        func varint(_ value: Int) { Varint.append(UInt64(value), to: &out) }
        func text(_ value: String) {
            varint(value.utf8.count)
            out.append(contentsOf: value.utf8)
        }
        varint(changes.count)
        for change in changes {
            out.append(change.kind.rawValue)
            text(change.entity)
            out.append(contentsOf: change.id.bytes)
            guard change.kind != .delete else { continue }
            varint(change.fields.count)
            for field in change.fields {
                text(field.name)
                out.append(field.wire)
                varint(field.value.count)
                out.append(contentsOf: field.value)
            }
        }
        return out
    }

    package static func decode(_ bytes: [UInt8]) throws(SyncPayloadError) -> SyncChangeSet {
        guard bytes.count <= maximumPayload else {
            throw SyncPayloadError("a payload of \(bytes.count) bytes (the limit is \(maximumPayload))")
        }
        // `withUnsafeBytes` rethrows untyped errors: the result carries the typed one out.
        let decoded = bytes.withUnsafeBytes { raw in
            Result { () throws(SyncPayloadError) -> SyncChangeSet in
                var input = PayloadInput(reader: ByteReader(raw))
                return try decode(&input, first: bytes.first ?? 0)
            }
        }
        return try decoded.get()
    }

    /// Whether the encoded change set `bytes` holds a field of wire type
    /// ``external``, read without copying a name or a value (a push and a
    /// pull ask this of every change, and most hold no external value);
    /// true for bytes that do not decode, which ``decode(_:)`` explains.
    package static func mentionsExternal(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            do {
                guard try reader.byte() == 1 else { return true }
                for _ in 0..<(try reader.count()) {
                    let kind = try reader.byte()
                    _ = try reader.take(try reader.count())
                    _ = try reader.take(16)
                    guard kind != Kind.delete.rawValue else { continue }
                    for _ in 0..<(try reader.count()) {
                        _ = try reader.take(try reader.count())
                        if try reader.byte() == external { return true }
                        _ = try reader.take(try reader.count())
                    }
                }
                return false
            } catch {
                return true
            }
        }
    }

    private static func decode(_ input: inout PayloadInput, first: UInt8) throws(SyncPayloadError) -> SyncChangeSet {
        guard try input.byte() == 1 else { throw SyncPayloadError("unknown payload format \(first)") }
        var changes: [Change] = []
        for _ in 0..<(try input.count()) {
            guard let kind = Kind(rawValue: try input.byte()) else { throw SyncPayloadError("unknown change kind") }
            let entity = try input.name()
            let id = SyncID(bytes: try input.slice(16))
            var change = Change(kind: kind, entity: entity, id: id)
            if kind != .delete {
                for _ in 0..<(try input.count()) {
                    let name = try input.name()
                    let wire = try input.byte()
                    let value = try input.slice(try input.count())
                    guard isWellFormed(wire: wire, value) else {
                        throw SyncPayloadError(
                            "\(entity).\(name): a value of \(value.count) bytes that is not one of wire type \(wire)")
                    }
                    change.fields.append(Field(name: name, wire: wire, value: value))
                }
            }
            changes.append(change)
        }
        guard input.reader.isAtEnd else { throw SyncPayloadError("\(input.reader.remaining) bytes after the changes") }
        return SyncChangeSet(changes: changes)
    }
}

/// True when `value` is exactly one encoded value of wire type `wire`
/// (so that copying it into a record cannot smuggle in other fields).
private func isWellFormed(wire: UInt8, _ value: [UInt8]) -> Bool {
    func varintEnd(_ bytes: [UInt8]) -> (value: UInt64, end: Int)? {
        bytes.withUnsafeBytes { raw in
            var input = ByteReader(raw)
            guard let value = try? input.varint() else { return nil }
            return (value, input.index)
        }
    }
    switch wire {
    case 0: return varintEnd(value)?.end == value.count
    case 1: return value.count == 8
    case SyncChangeSet.toOne: return value.isEmpty || value.count == 16
    case SyncChangeSet.toMany: return value.count % 16 == 0
    case SyncChangeSet.external:
        do {
            _ = try ExternalReference.decode(value)
            return true
        } catch {
            return false
        }
    case 3: return value.isEmpty
    case 5: return value.count == 4
    case 2:
        guard let (length, end) = varintEnd(value) else { return false }
        return length == UInt64(value.count - end)
    default: return false
    }
}

/// A server payload that does not decode.
package struct SyncPayloadError: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}

/// A model's identifier across devices: 16 random bytes made by the device
/// that first pushed the model.
package struct SyncID: Hashable, Sendable, CustomStringConvertible {
    package let bytes: [UInt8]

    package init(bytes: [UInt8]) {
        precondition(bytes.count == 16, "a sync identifier has 16 bytes")
        self.bytes = bytes
    }

    /// A new random identifier.
    package static func make() -> SyncID {
        let uuid = UUID().uuid
        return SyncID(bytes: withUnsafeBytes(of: uuid) { Array($0) })
    }

    package var description: String {
        bytes.map { String($0, radix: 16).leftPadded(2) }.joined()
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// The bounded reader over a server payload, its failures given as
/// ``SyncPayloadError``.
private struct PayloadInput {
    var reader: ByteReader

    mutating func byte() throws(SyncPayloadError) -> UInt8 {
        do { return try reader.byte() } catch { throw SyncPayloadError(error.description) }
    }

    /// A count or length: never more than the bytes left.
    mutating func count() throws(SyncPayloadError) -> Int {
        do { return try reader.count() } catch { throw SyncPayloadError(error.description) }
    }

    mutating func slice(_ length: Int) throws(SyncPayloadError) -> [UInt8] {
        do { return try reader.copy(length) } catch { throw SyncPayloadError(error.description) }
    }

    mutating func name() throws(SyncPayloadError) -> String {
        let length = try count()
        guard length <= SyncChangeSet.maximumName else { throw SyncPayloadError("a name of \(length) bytes") }
        guard let text = String(validating: try slice(length), as: UTF8.self), !text.isEmpty else {
            throw SyncPayloadError("a name that is empty or not UTF-8")
        }
        return text
    }
}
