import Foundation

// Foundation API that SwiftData code calls around its models and that
// Foundation on Linux lacks: the standard directory URLs (where apps put
// their store), `String(localized:)` and `LocalizedStringResource` in model
// code and `autoreleasepool`
// around batch imports. Declared only where Foundation has none of them
// (not on Apple platforms), with Foundation's names and meanings, so the
// same source compiles everywhere. `localizedStandardContains`,
// `caseInsensitiveCompare`, `localizedCompare` and `evaluate` inside
// `#Predicate` are in the files beside this one.

#if !canImport(Darwin)
    extension URL {
        /// The user's directory `directory` (`~/Documents` and so on, as
        /// Foundation's `FileManager` on Linux names them after the XDG base
        /// directories), or `fallback` under the home directory when it
        /// names none. The directory is not created.
        private static func userDirectory(_ directory: FileManager.SearchPathDirectory, fallback: String) -> URL {
            FileManager.default.urls(for: directory, in: .userDomainMask).first
                ?? URL.homeDirectory.appendingPathComponent(fallback, isDirectory: true)
        }

        /// The user's documents directory: `~/Documents`.
        public static var documentsDirectory: URL { userDirectory(.documentDirectory, fallback: "Documents") }
        /// Where an app keeps its own files, such as its store:
        /// `$XDG_DATA_HOME`, or `~/.local/share`.
        public static var applicationSupportDirectory: URL {
            userDirectory(.applicationSupportDirectory, fallback: ".local/share")
        }
        /// Where an app keeps files it can make again: `$XDG_CACHE_HOME`,
        /// or `~/.cache`.
        public static var cachesDirectory: URL { userDirectory(.cachesDirectory, fallback: ".cache") }
        /// The user's library directory. Linux has none; this is the
        /// application support directory (`~/.local/share`), where the
        /// things an Apple app keeps in its library go.
        public static var libraryDirectory: URL { userDirectory(.libraryDirectory, fallback: ".local/share") }
        /// The user's downloads directory: `~/Downloads`.
        public static var downloadsDirectory: URL { userDirectory(.downloadsDirectory, fallback: "Downloads") }
        /// The user's desktop directory: `~/Desktop`.
        public static var desktopDirectory: URL { userDirectory(.desktopDirectory, fallback: "Desktop") }
        /// The user's movies directory: `~/Videos`.
        public static var moviesDirectory: URL { userDirectory(.moviesDirectory, fallback: "Videos") }
        /// The user's music directory: `~/Music`.
        public static var musicDirectory: URL { userDirectory(.musicDirectory, fallback: "Music") }
        /// The user's pictures directory: `~/Pictures`.
        public static var picturesDirectory: URL { userDirectory(.picturesDirectory, fallback: "Pictures") }
        /// The user's public directory: `~/Public`.
        public static var sharedPublicDirectory: URL { userDirectory(.sharedPublicDirectory, fallback: "Public") }
        /// The user's trash: `~/.Trash`.
        public static var trashDirectory: URL { userDirectory(.trashDirectory, fallback: ".Trash") }
    }

    /// Runs `body`. Apple platforms drain the Objective-C objects it
    /// autoreleased when it returns; Linux has no autorelease pools, and
    /// Swift releases each object when its last reference goes.
    public func autoreleasepool<Result>(invoking body: () throws -> Result) rethrows -> Result {
        try body()
    }

    extension String {
        /// A string to localize: its key (with a format specifier for each
        /// interpolated value, as Apple's `String.LocalizationValue`
        /// writes keys: `%@` for text and objects, `%lld` for integers,
        /// `%lf` for floating-point numbers) and the values.
        public struct LocalizationValue: Hashable, Codable, Sendable, ExpressibleByStringInterpolation {
            /// The key a strings table looks the string up by.
            public let key: String
            /// The string with every value in place, used when no table has
            /// the key.
            let defaultValue: String
            /// The interpolated values, in order, as text.
            let arguments: [String]

            /// A value whose key is `value`, with nothing interpolated.
            public init(stringLiteral value: String) {
                self.init(key: value, defaultValue: value, arguments: [])
            }

            /// A value built from a literal with interpolations.
            public init(stringInterpolation: StringInterpolation) {
                self.init(
                    key: stringInterpolation.key, defaultValue: stringInterpolation.value,
                    arguments: stringInterpolation.arguments)
            }

            /// A value whose key and text are `value` (no interpolation).
            public init(_ value: String) {
                self.init(stringLiteral: value)
            }

            private init(key: String, defaultValue: String, arguments: [String]) {
                self.key = key
                self.defaultValue = defaultValue
                self.arguments = arguments
            }

            /// Builds a ``LocalizationValue``'s key and text.
            public struct StringInterpolation: StringInterpolationProtocol {
                var key = ""
                var value = ""
                var arguments: [String] = []

                /// Room for `literalCapacity` characters and
                /// `interpolationCount` values.
                public init(literalCapacity: Int, interpolationCount: Int) {
                    key.reserveCapacity(literalCapacity + 4 * interpolationCount)
                }

                /// Literal text: part of the key, `%` written `%%`.
                public mutating func appendLiteral(_ literal: String) {
                    key += literal.replacingOccurrences(of: "%", with: "%%")
                    value += literal
                }

                /// An integer (`%lld` in the key).
                public mutating func appendInterpolation<T: BinaryInteger>(_ number: T) {
                    append("\(number)", specifier: "%lld")
                }

                /// A floating-point number (`%lf` in the key).
                public mutating func appendInterpolation<T: BinaryFloatingPoint>(_ number: T) {
                    append("\(number)", specifier: "%lf")
                }

                /// Text or any other value (`%@` in the key).
                public mutating func appendInterpolation<T>(_ value: T) {
                    append("\(value)", specifier: "%@")
                }

                private mutating func append(_ text: String, specifier: String) {
                    key += specifier
                    value += text
                    arguments.append(text)
                }
            }
        }

        /// The localized string for `keyAndValue` from `table` (default
        /// `Localizable`) of `bundle` (default the main bundle), with its
        /// values in place; the value itself, with its values in place,
        /// when no table has the key (as on Apple platforms). `locale` and
        /// `comment` are accepted as Foundation declares them.
        public init(
            localized keyAndValue: LocalizationValue, table: String? = nil, bundle: Bundle? = nil,
            locale: Locale = .current, comment: StaticString? = nil
        ) {
            self = Self.lookUp(keyAndValue.key, value: keyAndValue, table: table, bundle: bundle ?? .main)
        }

        /// The localized string for `key` from `table` of `bundle`, with the
        /// values of `defaultValue` in place; `defaultValue` itself when no
        /// table has the key.
        public init(
            localized key: StaticString, defaultValue: LocalizationValue, table: String? = nil,
            bundle: Bundle? = nil, locale: Locale = .current, comment: StaticString? = nil
        ) {
            self = Self.lookUp("\(key)", value: defaultValue, table: table, bundle: bundle ?? .main)
        }

        /// The localized string `resource` describes: from its table and
        /// bundle, or its default value when they have no string for its key.
        public init(localized resource: LocalizedStringResource) {
            self = Self.lookUp(resource.key, value: resource.defaultValue, table: resource.table, bundle: resource.bundle.bundle)
        }

        private static func lookUp(_ key: String, value: LocalizationValue, table: String?, bundle: Bundle) -> String {
            let found = bundle.localizedString(forKey: key, value: nil, table: table)
            guard found != key else { return value.defaultValue }
            return fill(found, with: value.arguments)
        }

        /// `format` with its `%@`, `%lld` and `%lf` specifiers (and
        /// positional `%1$@` forms) replaced by `arguments`, as text.
        static func fill(_ format: String, with arguments: [String]) -> String {
            var result = ""
            var next = 0
            var rest = Substring(format)
            while let percent = rest.firstIndex(of: "%") {
                result += rest[..<percent]
                rest = rest[rest.index(after: percent)...]
                if rest.first == "%" {
                    result += "%"
                    rest = rest.dropFirst()
                    continue
                }
                var position: Int?
                if let dollar = rest.firstIndex(of: "$"), let number = Int(rest[..<dollar]) {
                    position = number - 1
                    rest = rest[rest.index(after: dollar)...]
                }
                // The conversion: any length modifiers, then one letter or @.
                let conversion = rest.prefix { !$0.isLetter && $0 != "@" }.count
                rest = rest.dropFirst(conversion)
                while let letter = rest.first, letter == "l" || letter == "h" || letter == "q" || letter == "z" {
                    rest = rest.dropFirst()
                }
                guard !rest.isEmpty else { break }
                rest = rest.dropFirst()
                let index = position ?? next
                next += 1
                if arguments.indices.contains(index) { result += arguments[index] }
            }
            return result + rest
        }
    }

    /// A string to localize later, with where to look it up: its key, the
    /// value to use when no table has the key, the table, the locale and
    /// the bundle, as Foundation's `LocalizedStringResource` on Apple
    /// platforms. `String(localized:)` turns it into text.
    public struct LocalizedStringResource: Hashable, Codable, Sendable, ExpressibleByStringInterpolation {
        /// Where a resource's strings table is.
        public enum BundleDescription: Hashable, Codable, Sendable {
            /// The program's main bundle.
            case main
            /// The bundle at a URL.
            case atURL(URL)

            /// The bundle that holds `aClass`.
            public static func forClass(_ aClass: AnyClass) -> BundleDescription {
                .atURL(Bundle(for: aClass).bundleURL)
            }

            var bundle: Bundle {
                switch self {
                case .main: .main
                case .atURL(let url): Bundle(url: url) ?? .main
                }
            }
        }

        /// The key the strings table is searched for.
        public var key: String
        /// The text (with its values) when no table has the key.
        public var defaultValue: String.LocalizationValue
        /// The strings table; nil for `Localizable`.
        public var table: String?
        /// The locale to localize for.
        public var locale: Locale
        /// The bundle that holds the table.
        public var bundle: BundleDescription

        /// A resource whose key and default value are `keyAndValue`.
        public init(
            _ keyAndValue: String.LocalizationValue, table: String? = nil, locale: Locale = .current,
            bundle: BundleDescription = .main, comment: StaticString? = nil
        ) {
            self.init(keyAndValue.key, defaultValue: keyAndValue, table: table, locale: locale, bundle: bundle)
        }

        /// A resource with its own key and a default value.
        public init(
            _ key: StaticString, defaultValue: String.LocalizationValue, table: String? = nil,
            locale: Locale = .current, bundle: BundleDescription = .main, comment: StaticString? = nil
        ) {
            self.init("\(key)", defaultValue: defaultValue, table: table, locale: locale, bundle: bundle)
        }

        private init(
            _ key: String, defaultValue: String.LocalizationValue, table: String?, locale: Locale,
            bundle: BundleDescription
        ) {
            self.key = key
            self.defaultValue = defaultValue
            self.table = table
            self.locale = locale
            self.bundle = bundle
        }

        /// A resource whose key and default value are `value`.
        public init(stringLiteral value: String) {
            self.init(String.LocalizationValue(stringLiteral: value))
        }

        /// A resource built from a literal with interpolations.
        public init(stringInterpolation: String.LocalizationValue.StringInterpolation) {
            self.init(String.LocalizationValue(stringInterpolation: stringInterpolation))
        }
    }

    /// A type that can describe itself as a ``LocalizedStringResource``.
    public protocol CustomLocalizedStringResourceConvertible {
        /// The value as a string to localize.
        var localizedStringResource: LocalizedStringResource { get }
    }

    extension LocalizedStringResource: CustomLocalizedStringResourceConvertible {
        /// The resource itself.
        public var localizedStringResource: LocalizedStringResource { self }
    }
#endif
