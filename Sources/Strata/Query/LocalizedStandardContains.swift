import Foundation

// `localizedStandardContains` is the search most SwiftData apps write in a
// `#Predicate`. Foundation on Apple platforms has the predicate expression
// the macro builds (`PredicateExpressions.build_localizedStandardContains`);
// Foundation on Linux has the String method but not the expression. Strata
// provides the expression where Foundation lacks it, with Foundation's
// names, so the same source compiles everywhere.

#if !canImport(Darwin)
    extension PredicateExpressions {
        /// `root.localizedStandardContains(other)` in a predicate.
        public struct StringLocalizedStandardContains<
            Root: PredicateExpression, Other: PredicateExpression
        >: PredicateExpression
        where Root.Output: StringProtocol, Other.Output: StringProtocol {
            public typealias Output = Bool

            public let root: Root
            public let other: Other

            public init(root: Root, other: Other) {
                self.root = root
                self.other = other
            }

            public func evaluate(_ bindings: PredicateBindings) throws -> Bool {
                try root.evaluate(bindings).localizedStandardContains(other.evaluate(bindings))
            }
        }

        /// What `#Predicate` calls for `localizedStandardContains` (the
        /// macro's name for it, not Swift's usual spelling).
        // swift-format-ignore: AlwaysUseLowerCamelCase
        public static func build_localizedStandardContains<Root, Other>(
            _ root: Root, _ other: Other
        ) -> StringLocalizedStandardContains<Root, Other> {
            StringLocalizedStandardContains(root: root, other: other)
        }
    }

    extension PredicateExpressions.StringLocalizedStandardContains: Sendable
    where Root: Sendable, Other: Sendable {}

    extension PredicateExpressions.StringLocalizedStandardContains: Codable where Root: Codable, Other: Codable {
        private enum CodingKeys: String, CodingKey { case root, other }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            root = try container.decode(Root.self, forKey: .root)
            other = try container.decode(Other.self, forKey: .other)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(root, forKey: .root)
            try container.encode(other, forKey: .other)
        }
    }

    extension PredicateExpressions.StringLocalizedStandardContains: StandardPredicateExpression
    where Root: StandardPredicateExpression, Other: StandardPredicateExpression {}
#endif

/// Case- and diacritic-insensitive containment in the current locale: the
/// semantics of Foundation's `localizedStandardContains`, which Strata's
/// query evaluator applies on every platform.
func _strataLocalizedStandardContains(_ text: String, _ part: String) -> Bool {
    if part.isEmpty { return false }
    return text.range(of: part, options: [.caseInsensitive, .diacriticInsensitive], locale: .current) != nil
}
