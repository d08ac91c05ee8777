import Foundation

/// A value that can be part of an index or unique-constraint key: the
/// standard library's numbers, Bool and String, and Foundation's Date, Data,
/// UUID and URL. Enums with such raw values and optionals of all of these
/// are keyable too (see ``KeyValue``).
public protocol _KeyElementConvertible {
    /// The value as a key element. Read through the `_keyElement(_:)` functions
    /// that code the `@Model` macro generates calls; not meant to be called
    /// directly.
    var _keyElement: KeyEncoding.Element { get }
}

extension Bool: _KeyElementConvertible {
    /// The value as a key element: `.bool`. Read through code the `@Model`
    /// macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .bool(self) }
}
extension Int: _KeyElementConvertible {
    /// The value as a key element: `.int`, widened to `Int64`. Read through
    /// code the `@Model` macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .int(Int64(self)) }
}
extension Int8: _KeyElementConvertible {
    /// The value as a key element: `.int`, widened to `Int64`. Read through
    /// code the `@Model` macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .int(Int64(self)) }
}
extension Int16: _KeyElementConvertible {
    /// The value as a key element: `.int`, widened to `Int64`. Read through
    /// code the `@Model` macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .int(Int64(self)) }
}
extension Int32: _KeyElementConvertible {
    /// The value as a key element: `.int`, widened to `Int64`. Read through
    /// code the `@Model` macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .int(Int64(self)) }
}
extension Int64: _KeyElementConvertible {
    /// The value as a key element: `.int`. Read through code the `@Model` macro
    /// generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .int(self) }
}
extension UInt: _KeyElementConvertible {
    /// The value as a key element: `.uint`, widened to `UInt64`. Read through
    /// code the `@Model` macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .uint(UInt64(self)) }
}
extension UInt8: _KeyElementConvertible {
    /// The value as a key element: `.uint`, widened to `UInt64`. Read through
    /// code the `@Model` macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .uint(UInt64(self)) }
}
extension UInt16: _KeyElementConvertible {
    /// The value as a key element: `.uint`, widened to `UInt64`. Read through
    /// code the `@Model` macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .uint(UInt64(self)) }
}
extension UInt32: _KeyElementConvertible {
    /// The value as a key element: `.uint`, widened to `UInt64`. Read through
    /// code the `@Model` macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .uint(UInt64(self)) }
}
extension UInt64: _KeyElementConvertible {
    /// The value as a key element: `.uint`. Read through code the `@Model`
    /// macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .uint(self) }
}
extension Double: _KeyElementConvertible {
    /// The value as a key element: `.double`. Read through code the `@Model`
    /// macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .double(self) }
}
extension Float: _KeyElementConvertible {
    /// The value as a key element: `.double`, widened to `Double`. Read through
    /// code the `@Model` macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .double(Double(self)) }
}
extension String: _KeyElementConvertible {
    /// The value as a key element: `.string`. Read through code the `@Model`
    /// macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .string(self) }
}
extension Data: _KeyElementConvertible {
    /// The value as a key element: `.bytes`. Read through code the `@Model`
    /// macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .bytes([UInt8](self)) }
}
extension UUID: _KeyElementConvertible {
    /// The value as a key element: `.uuid`. Read through code the `@Model`
    /// macro generates; not meant to be called directly.
    public var _keyElement: KeyEncoding.Element { .uuid(self) }
}
extension Date: _KeyElementConvertible {
    /// The value as a key element: `.double`, its seconds since 1 January 2001.
    /// Read through code the `@Model` macro generates; not meant to be called
    /// directly.
    public var _keyElement: KeyEncoding.Element { .double(timeIntervalSinceReferenceDate) }
}
extension URL: _KeyElementConvertible {
    /// The value as a key element: `.string`, its `absoluteString`. Read
    /// through code the `@Model` macro generates; not meant to be called
    /// directly.
    public var _keyElement: KeyEncoding.Element { .string(absoluteString) }
}

/// Which attribute types can be part of a key, decided from the declared
/// type (the schema knows properties by key path and `Any.Type` only); the
/// values themselves are read by generated code through `_keyElement`.
///
/// Decimal is not keyable: it has no exact order-preserving encoding here
/// yet, so an index or unique constraint on one is refused when the
/// container is created, as are Codable structs and collections.
enum KeyValue {
    /// True when values of `type` can be part of a key.
    static func isKeyable(_ type: Any.Type) -> Bool {
        if let optional = type as? any _OptionalMarker.Type { return isKeyable(optional._wrappedType) }
        if type is any _KeyElementConvertible.Type { return true }
        if let raw = type as? any RawRepresentable.Type { return rawValueType(raw) is any _KeyElementConvertible.Type }
        return false
    }

    private static func rawValueType<R: RawRepresentable>(_ type: R.Type) -> Any.Type { R.RawValue.self }
}

// Key elements of stored properties, chosen at compile time by the
// property's type; generated `_strataKeyElement(field:)` calls these.

/// The key element of a keyable value. Code the `@Model` macro generates calls
/// the `_keyElement(_:)` overloads, one chosen at compile time by the
/// property's type; not meant to be called directly.
@inlinable public func _keyElement<V: _KeyElementConvertible>(_ value: V) -> KeyEncoding.Element? { value._keyElement }

/// The key element of an optional keyable value: `.null` for nil. Called by
/// code the `@Model` macro generates; not meant to be called directly.
@inlinable public func _keyElement<V: _KeyElementConvertible>(_ value: V?) -> KeyEncoding.Element? {
    value.map(\._keyElement) ?? .null
}

/// The key element of an enum whose raw value is keyable: its raw value's.
/// Called by code the `@Model` macro generates; not meant to be called
/// directly.
@inlinable public func _keyElement<V: RawRepresentable>(_ value: V) -> KeyEncoding.Element?
where V.RawValue: _KeyElementConvertible {
    value.rawValue._keyElement
}

/// The key element of an optional enum whose raw value is keyable: its raw
/// value's, or `.null` for nil. Called by code the `@Model` macro generates;
/// not meant to be called directly.
@inlinable public func _keyElement<V: RawRepresentable>(_ value: V?) -> KeyEncoding.Element?
where V.RawValue: _KeyElementConvertible {
    value.map(\.rawValue._keyElement) ?? .null
}

/// A to-one relationship's key element: its target's row. Called by code
/// the `@Model` macro generates; not meant to be called directly.
@inlinable public func _keyElement<T: PersistentModel>(_ value: T) -> KeyEncoding.Element? {
    .int(value._strataState.rowID)
}

/// An optional to-one relationship's key element: its target's row, or
/// `.null` for nil. Called by code the `@Model` macro generates; not meant
/// to be called directly.
@inlinable public func _keyElement<T: PersistentModel>(_ value: T?) -> KeyEncoding.Element? {
    value.map { .int($0._strataState.rowID) } ?? .null
}

/// Not keyable (Codable structs, collections, to-many relationships,
/// Decimal).
@inlinable public func _keyElement<V>(_ value: V) -> KeyEncoding.Element? { nil }
