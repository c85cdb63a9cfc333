# frozen_string_literal: true

require 'net/http'
require 'json'

module Fetch
  class Error < StandardError; end

  class Fetcher
    attr_reader :base, :retries

    def initialize(base, retries: 3)
      @base = base
      @retries = retries
    end

    def get(path)
      uri = URI.join(@base, path)
      response = Net::HTTP.get_response(uri)
      JSON.parse(response.body)
    rescue JSON::ParserError => e
      raise Error, "bad JSON from #{uri}: #{e.message}"
    rescue SocketError, Timeout::Error => e
      warn "network error: #{e.message}"
      nil
    end

    def with_retries
      attempts = 0
      begin
        attempts += 1
        yield
      rescue IOError => err
        retry if attempts < @retries
        raise Error, err.message
      ensure
        puts "attempts: #{attempts}"
      end
    end

    def each_page(path)
      page = 1
      loop do
        data = get("#{path}?page=#{page}")
        break if data.nil? || data.empty?
        data.each { |item| yield item }
        page += 1
      end
    end
  end
end
