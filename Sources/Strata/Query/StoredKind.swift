import Foundation

/// How a stored attribute is read from a record into a ``QueryValue``,
/// decided once from the attribute's declared type.
///
/// The kinds mirror the record format (``_RecordWriter``): an enum with a
/// raw value reads as its raw value, a Date as seconds since 2001, a URL
/// as its text, so that record values, key elements and captured constants
/// agree. Codable values are decoded whole and compared through their own
/// conformances.
enum StoredKind {
    case bool, signed, unsigned, double, float, date, string, url, data, uuid, decimal
    /// A Codable value: decodes the payload.
    case codable((UnsafeRawBufferPointer) throws -> Any)
    /// A relationship (read from the record or its tree, not by kind).
    case relationship
    /// A type the record format does not know.
    case opaque

    init(_ type: Any.Type) {
        if let optional = type as? any _OptionalMarker.Type {
            self.init(optional._wrappedType)
            return
        }
        switch type {
        case is Bool.Type: self = .bool
        case is Double.Type: self = .double
        case is Float.Type: self = .float
        case is Date.Type: self = .date
        case is String.Type: self = .string
        case is URL.Type: self = .url
        case is Data.Type: self = .data
        case is UUID.Type: self = .uuid
        case is Decimal.Type: self = .decimal
        case is any (FixedWidthInteger & SignedInteger).Type: self = .signed
        case is any (FixedWidthInteger & UnsignedInteger).Type: self = .unsigned
        default:
            if let raw = type as? any (RawRepresentable & Decodable).Type, let kind = Self.rawKind(raw) {
                self = kind
            } else {
                self = Self.codableKind(type) ?? .opaque
            }
        }
    }

    /// The kind of an enum's raw value, when the record stores the raw
    /// value (a `_RecordPrimitive` raw type).
    private static func rawKind<R: RawRepresentable & Decodable>(_ type: R.Type) -> StoredKind? {
        guard R.RawValue.self is any _RecordPrimitive.Type else { return nil }
        return StoredKind(R.RawValue.self)
    }

    private static func codableKind(_ type: Any.Type) -> StoredKind? {
        guard let decodable = type as? any Decodable.Type else { return nil }
        return .codable(decoder(decodable))
    }

    private static func decoder<T: Decodable>(_ type: T.Type) -> (UnsafeRawBufferPointer) throws -> Any {
        { bytes in try _BinaryDecoder.decode(T.self, from: Array(bytes)[...]) }
    }
}

extension _RecordReader {
    /// Attribute `field` of kind `kind` as a query value; nil and a
    /// missing field read as `.null`.
    mutating func queryValue(field: Int, kind: StoredKind) throws -> QueryValue {
        guard let slot = try find(field), slot.wire != RecordFormat.null else {
            // An attribute a migration added with a default (or made
            // non-optional) reads as that default where the record lacks it.
            guard let record = entity.defaultRecords[field] else { return .null }
            return try Self.inDefault(record, field: field, self) { reader, _ in
                try reader.queryValue(field: field, kind: kind)
            }
        }
        switch kind {
        case .bool: return .scalar(.bool(try Bool._decode(slot, from: &self, field: field)))
        case .signed: return .scalar(.int(try Int64._decode(slot, from: &self, field: field)))
        case .unsigned: return .scalar(.uint(try UInt64._decode(slot, from: &self, field: field)))
        case .double, .date: return .scalar(.double(Double(bitPattern: try payloadFixed64(slot, field: field))))
        case .float: return .scalar(.double(Double(Float(bitPattern: try payloadFixed32(slot, field: field)))))
        case .string, .url: return .scalar(.string(try String._decode(slot, from: &self, field: field)))
        case .data: return .scalar(.bytes(Array(try payloadBytes(slot, field: field))))
        case .uuid: return .scalar(.uuid(try UUID._decode(slot, from: &self, field: field)))
        case .decimal: return .opaque(try Decimal._decode(slot, from: &self, field: field))
        case .codable(let decode):
            do {
                return .opaque(try decode(try payloadBytes(slot, field: field)))
            } catch let error as SwiftDataError {
                throw error
            } catch {
                throw corrupt(field: field, "a Codable value did not decode: \(error)")
            }
        case .relationship, .opaque:
            throw corrupt(field: field, "not readable by the query evaluator")
        }
    }
}
